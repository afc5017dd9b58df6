// Mixup / CutMix against timm's Mixup: the oracle records every numpy draw
// timm makes; replaying them here must give the same mixed images and soft
// targets in every mode. The draws of our own random source are checked
// against the distributions' formulas on a large seeded sample.
#include <cmath>
#include <deque>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/mixup.hpp"

#include <doctest/doctest.h>

namespace test_data_mixup {

namespace fs = std::filesystem;
using namespace timm;

namespace {

// Replays the draws timm made, checking that each call asks for the same
// kind of draw with the same parameters.
class ReplayRandom : public MixupRandom {
 public:
  explicit ReplayRandom(const fs::path& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) lines_.push_back(line);
  }
  double rand() override {
    std::istringstream f(next("rand"));
    double v;
    f >> v;
    return v;
  }
  double beta(double alpha) override {
    std::istringstream f(next("beta"));
    double a, v;
    f >> a >> v;
    CHECK(a == doctest::Approx(alpha));
    return v;
  }
  int64_t randint(int64_t lo, int64_t hi) override {
    std::istringstream f(next("randint"));
    int64_t l, h, v;
    f >> l >> h >> v;
    CHECK(l == lo);
    CHECK(h == hi);
    return v;
  }
  std::size_t left() const { return lines_.size(); }

 private:
  std::string next(const std::string& kind) {
    REQUIRE_MESSAGE(!lines_.empty(), "timm made fewer draws; wanted " << kind);
    std::string line = lines_.front();
    lines_.pop_front();
    REQUIRE_MESSAGE(line.rfind(kind + " ", 0) == 0, "timm drew '" << line << "' where we draw " << kind);
    return line.substr(kind.size() + 1);
  }
  std::deque<std::string> lines_;
};

at::Tensor read_f32(const fs::path& path, at::IntArrayRef shape) {
  const std::vector<std::uint8_t> bytes = test::read_bytes(path);
  at::Tensor t = at::empty(shape, at::kFloat);
  REQUIRE(bytes.size() == static_cast<std::size_t>(t.numel()) * sizeof(float));
  std::memcpy(t.data_ptr<float>(), bytes.data(), bytes.size());
  return t;
}

struct Case {
  std::string name;
  MixupOptions options;
  uint64_t seed;
  bool enabled = true;
};

std::string spec(const Case& c) {
  const auto& o = c.options;
  const std::string lo = o.cutmix_minmax ? std::to_string(o.cutmix_minmax->first) : "none";
  const std::string hi = o.cutmix_minmax ? std::to_string(o.cutmix_minmax->second) : "none";
  return c.name + ":" + std::to_string(o.mixup_alpha) + ":" + std::to_string(o.cutmix_alpha) + ":" + lo + ":" + hi +
         ":" + std::to_string(o.prob) + ":" + std::to_string(o.switch_prob) + ":" + o.mode + ":" +
         std::to_string(o.label_smoothing) + ":" + std::to_string(c.seed) + ":" + (c.enabled ? "1" : "0");
}

std::vector<Case> parity_cases() {
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (const std::string mode : {"batch", "pair", "elem"}) {
    auto add = [&](const std::string& what, MixupOptions o) {
      o.mode = mode;
      o.num_classes = 5;
      // Several seeds per setting so that both branches of each draw occur.
      for (int k = 0; k < 4; ++k) cases.push_back({what + "_" + mode + std::to_string(k), o, seed++});
    };
    add("mixup", {.mixup_alpha = 0.8, .cutmix_alpha = 0.0, .label_smoothing = 0.1});
    add("cutmix", {.mixup_alpha = 0.0, .cutmix_alpha = 1.0, .label_smoothing = 0.1});
    add("both", {.mixup_alpha = 0.8, .cutmix_alpha = 1.0, .switch_prob = 0.5, .label_smoothing = 0.1});
    add("minmax",
        {.mixup_alpha = 0.0, .cutmix_alpha = 0.0, .cutmix_minmax = std::pair{0.2, 0.8}, .label_smoothing = 0.0});
    add("minmax_both", {.mixup_alpha = 0.4, .cutmix_minmax = std::pair{0.3, 0.9}, .switch_prob = 0.7});
    add("prob", {.mixup_alpha = 0.4, .cutmix_alpha = 1.0, .prob = 0.5, .label_smoothing = 0.3});
    add("smooth0", {.mixup_alpha = 1.0, .cutmix_alpha = 0.0, .label_smoothing = 0.0});
    MixupOptions off{.mixup_alpha = 0.8, .cutmix_alpha = 1.0, .label_smoothing = 0.1};
    off.mode = mode;
    off.num_classes = 5;
    cases.push_back({"off_" + mode, off, seed++, false});
  }
  return cases;
}

}  // namespace

TEST_CASE("Mixup/CutMix images and targets equal timm's for the same draws") {
  test::TempDir dir;
  const std::vector<Case> cases = parity_cases();
  std::vector<std::string> args{dir.path().string()};
  for (const Case& c : cases) args.push_back(spec(c));
  test::run_oracle("mixup_oracle.py", args, std::chrono::seconds(120));

  std::ifstream shape_file(dir / "shape.txt");
  int64_t n, c, h, w, num_classes;
  shape_file >> n >> c >> h >> w >> num_classes;
  const at::Tensor input = read_f32(dir / "input.f32", {n, c, h, w});
  std::ifstream target_file(dir / "targets.txt");
  std::vector<int64_t> target_values(n);
  for (auto& t : target_values) target_file >> t;
  const at::Tensor targets = at::tensor(target_values, at::kLong);

  // Same float ops in the same order: equal up to float rounding of fused
  // kernels; tolerance 1e-6 absolute on values of order 1.
  constexpr double kTol = 1e-6;
  int cutmix_boxes = 0;
  for (const Case& cs : cases) {
    CAPTURE(cs.name);
    Mixup mixup(cs.options);
    mixup.set_enabled(cs.enabled);
    ReplayRandom random(dir / (cs.name + ".draws.txt"));
    at::Tensor images = input.clone();
    const MixupResult result = mixup.apply(images, targets, random);
    CHECK(random.left() == 0);
    const at::Tensor want_images = read_f32(dir / (cs.name + ".images.f32"), {n, c, h, w});
    const at::Tensor want_targets = read_f32(dir / (cs.name + ".targets.f32"), {n, num_classes});
    const double image_diff = (images - want_images).abs().max().item<double>();
    const double target_diff = (result.targets - want_targets).abs().max().item<double>();
    CHECK(image_diff <= kTol);
    CHECK(target_diff <= kTol);
    CHECK(result.targets.sizes() == want_targets.sizes());
    CHECK(result.lam.size() == static_cast<std::size_t>(n));
    if (!cs.enabled) CHECK(at::equal(images, input));
    // Count cases where a box was pasted (some pixels equal to the partner's).
    if (cs.name.rfind("cutmix", 0) == 0 && !at::equal(images, input)) ++cutmix_boxes;
  }
  CHECK(cutmix_boxes > 0);
}

TEST_CASE("mixup options are checked") {
  CHECK_THROWS_AS(Mixup({.mode = "row"}), UsageError);
  CHECK_THROWS_AS(Mixup({.mixup_alpha = 0.0, .cutmix_alpha = 0.0}), UsageError);
  CHECK_THROWS_AS(Mixup({.cutmix_minmax = std::pair{0.8, 0.2}}), UsageError);
  Mixup minmax({.mixup_alpha = 0.0, .cutmix_minmax = std::pair{0.2, 0.8}});
  CHECK(minmax.options().cutmix_alpha == 1.0);  // forced, as timm
  Mixup mixup({.mixup_alpha = 1.0});
  at::Tensor odd = at::zeros({3, 3, 4, 4});
  Rng rng(0);
  CHECK_THROWS_AS(mixup.apply(odd, at::zeros({3}, at::kLong), rng), Error);
}

TEST_CASE("lam follows beta(alpha, alpha) and the switch and mix probabilities hold") {
  constexpr int64_t kCount = 200000;
  Rng rng(1234);
  RngMixupRandom random(rng);
  for (const double alpha : {0.2, 0.4, 0.8, 1.0}) {
    CAPTURE(alpha);
    Mixup mixup({.mixup_alpha = alpha, .cutmix_alpha = 0.0});
    const MixupParams p = mixup.draw_params(kCount, random);
    double sum = 0, sum_sq = 0;
    int64_t below_quarter = 0;
    for (double lam : p.lam) {
      sum += lam;
      sum_sq += lam * lam;
      below_quarter += lam < 0.25;
    }
    const double mean = sum / kCount;
    const double var = sum_sq / kCount - mean * mean;
    // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)); the mean's standard
    // error is sqrt(var / n) ~ 1e-3, so 5e-3 is 5 sigma.
    CHECK(std::abs(mean - 0.5) < 5e-3);
    CHECK(std::abs(var - 1.0 / (4.0 * (2.0 * alpha + 1.0))) < 3e-3);
    if (alpha == 1.0) CHECK(std::abs(below_quarter / double(kCount) - 0.25) < 5e-3);  // uniform CDF
  }
  // Elem mode with both mixes: use_cutmix ~ Bernoulli(switch_prob); lam == 1
  // (not mixed) with probability 1 - prob.
  Mixup both({.mixup_alpha = 0.4, .cutmix_alpha = 1.0, .prob = 0.7, .switch_prob = 0.3});
  const MixupParams p = both.draw_params(kCount, random);
  int64_t cut = 0, unmixed = 0;
  for (int64_t i = 0; i < kCount; ++i) {
    cut += p.use_cutmix[i];
    unmixed += p.lam[i] == 1.0;
  }
  CHECK(std::abs(cut / double(kCount) - 0.3) < 5e-3);      // sigma ~ 1e-3
  CHECK(std::abs(unmixed / double(kCount) - 0.3) < 5e-3);  // sigma ~ 1e-3
  // Batch mode: one draw per call, the same probabilities.
  int64_t batch_cut = 0, batch_unmixed = 0;
  constexpr int64_t kBatches = 50000;
  for (int64_t i = 0; i < kBatches; ++i) {
    const MixupParams b = both.draw_params(0, random);
    batch_unmixed += b.lam[0] == 1.0;
    batch_cut += b.use_cutmix[0];
  }
  CHECK(std::abs(batch_unmixed / double(kBatches) - 0.3) < 0.01);    // sigma ~ 2e-3
  CHECK(std::abs(batch_cut / double(kBatches) - 0.7 * 0.3) < 0.01);  // sigma ~ 2e-3
}

TEST_CASE("rand_bbox centres cover the image and boxes stay inside it") {
  Rng rng(7);
  RngMixupRandom random(rng);
  int64_t min_cy = 100, max_cy = -1;
  for (int i = 0; i < 20000; ++i) {
    const CutmixBox b = rand_bbox(int64_t{10}, int64_t{12}, 0.0, random);  // full-size box: clipped by centre
    CHECK(b.yl >= 0);
    CHECK(b.yh <= 10);
    CHECK(b.xl >= 0);
    CHECK(b.xh <= 12);
    // With lam 0 the box is 10 high centred at cy: yl = max(cy - 5, 0).
    const int64_t cy = b.yh - 5;
    min_cy = std::min(min_cy, cy);
    max_cy = std::max(max_cy, b.yl + 5);
  }
  CHECK(min_cy == 0);
  CHECK(max_cy == 9);  // randint's high is exclusive
  for (int i = 0; i < 2000; ++i) {
    const CutmixBox b = rand_bbox_minmax(20, 30, {0.2, 0.8}, random);
    CHECK(b.yh - b.yl >= 4);
    CHECK(b.yh - b.yl < 16);
    CHECK(b.yh <= 20);
    CHECK(b.xh <= 30);
  }
}

TEST_CASE("disabled mixup (--mixup-off-epoch) gives the smoothed one-hot targets") {
  Mixup mixup({.mixup_alpha = 1.0, .label_smoothing = 0.1, .num_classes = 4});
  mixup.set_enabled(false);
  at::Tensor images = at::rand({2, 1, 3, 3});
  const at::Tensor before = images.clone();
  Rng rng(0);
  const MixupResult r = mixup.apply(images, at::tensor({2, 0}, at::kLong), rng);
  CHECK(at::equal(images, before));
  CHECK(r.targets[0][2].item<double>() == doctest::Approx(0.925));
  CHECK(r.targets[0][0].item<double>() == doctest::Approx(0.025));
  CHECK(r.targets[1][0].item<double>() == doctest::Approx(0.925));
}

}  // namespace test_data_mixup
