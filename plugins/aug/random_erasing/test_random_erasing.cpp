// RandomErasing against timm: the rectangles timm's _erase computes from a
// recorded stream of random draws, replayed into ours; the reprs; and, with
// our Rng, the rules of each mode on a normalised batch (probability, area
// and aspect bounds, count, fill values, the clean split of --resplit).
#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "scripted_erase_draws.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/random_erasing.hpp"
#include "timm/data/transform.hpp"
#include "timm/plugin/registry.hpp"

namespace test_random_erasing {

using namespace timm;

namespace {

std::shared_ptr<const BatchTransform> erasing_stage(double p, const std::string& mode, int64_t count,
                                                    int64_t splits = 0) {
  test::load_builtin_plugins();
  TransformArgs args;
  args.re_prob = p;
  args.re_mode = mode;
  args.re_count = count;
  args.re_num_splits = splits;
  return Registry::global().factory<AugmentationFactory>(PluginKind::kAugmentation, "random_erasing")(args).batch;
}

// The bounding box of the values that differ from 1 in sample i (all channels).
struct Box {
  int64_t top = -1, left = -1, height = 0, width = 0, changed = 0;
};
Box erased_box(const at::Tensor& batch, int64_t i) {
  const at::Tensor mask = batch[i].ne(1.0).any(0);
  Box b;
  b.changed = mask.sum().item<int64_t>();
  if (b.changed == 0) return b;
  const at::Tensor rows = mask.any(1).nonzero(), cols = mask.any(0).nonzero();
  b.top = rows.min().item<int64_t>();
  b.left = cols.min().item<int64_t>();
  b.height = rows.max().item<int64_t>() - b.top + 1;
  b.width = cols.max().item<int64_t>() - b.left + 1;
  return b;
}

}  // namespace

TEST_CASE("the rectangles equal timm's _erase for the same random draws; reprs equal timm's") {
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"erasing", dir.path().string()});
  std::ifstream in(dir / "erasing.txt");
  std::string line;
  std::optional<RandomErasing> re;
  int64_t h = 0, w = 0;
  int trials = 0, rects = 0, reprs = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (kind == "config") {
      RandomErasingOptions o;
      int64_t n;
      f >> o.probability >> o.min_count;
      int64_t hi;
      f >> hi >> h >> w >> n;
      o.max_count = hi;
      re.emplace(o);
      std::string repr;
      std::getline(f >> std::ws, repr);
      CHECK(re->repr() == repr);
    } else if (kind == "trial") {
      std::vector<std::string> draws;
      std::string tok;
      while (f >> tok && tok != "|") draws.push_back(tok);
      std::vector<std::string> want;
      while (f >> tok) want.push_back(tok);
      test::ScriptedEraseDraws scripted(draws);
      const auto got = re->plan(h, w, scripted);
      std::vector<std::string> got_text;
      for (const auto& r : got) {
        got_text.push_back(std::to_string(r.top) + "," + std::to_string(r.left) + "," + std::to_string(r.height) + "," +
                           std::to_string(r.width));
      }
      CHECK_MESSAGE(got_text == want, line);
      CHECK_MESSAGE(scripted.done(), "fewer draws than timm made: " << line);
      ++trials;
      rects += static_cast<int>(want.size());
    } else if (kind == "repr") {
      std::string repr;
      std::getline(f >> std::ws, repr);
      RandomErasingOptions o;
      o.probability = 0.25;
      o.max_count = 3;
      o.mode = repr.find("mode=const") != std::string::npos  ? "const"
               : repr.find("mode=rand") != std::string::npos ? "rand"
                                                             : "pixel";
      CHECK(RandomErasing(o).repr() == repr);
      ++reprs;
    }
  }
  CHECK(trials == 1050);
  CHECK(rects > 800);
  CHECK(reprs == 3);
  MESSAGE("RandomErasing geometry vs timm: " << trials << " trials, " << rects << " rectangles, all equal");
}

TEST_CASE("const mode: zeros in one box per sample, area and aspect in bounds, probability p") {
  const auto stage = erasing_stage(0.5, "const", 1);
  at::Tensor batch = at::ones({400, 3, 32, 48});
  Rng rng(7);
  stage->apply(batch, rng);
  int erased = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const Box b = erased_box(batch, i);
    if (b.changed == 0) continue;
    ++erased;
    // A solid rectangle of zeros, the same in every channel.
    CHECK(b.changed == b.height * b.width);
    const at::Tensor region = batch[i].slice(1, b.top, b.top + b.height).slice(2, b.left, b.left + b.width);
    CHECK(region.eq(0).all().item<bool>());
    const double area = static_cast<double>(b.height * b.width), full = 32.0 * 48.0;
    // round() of the sides moves the area a little past [0.02, 1/3].
    CHECK(area >= 0.02 * full * 0.6);
    CHECK(area <= full / 3.0 * 1.25);
    const double aspect = static_cast<double>(b.height) / static_cast<double>(b.width);
    CHECK(aspect >= 0.3 * 0.6);
    CHECK(aspect <= 1 / 0.3 / 0.6);
    CHECK(b.height < 32);
    CHECK(b.width < 48);
  }
  CHECK(erased > 160);
  CHECK(erased < 240);
  CHECK(stage->repr() == "RandomErasing(p=0.5, mode=const, count=(1, 1))");
}

TEST_CASE("rand mode: one normal value per channel in the box; pixel mode: normal values per pixel") {
  auto rand_stage = erasing_stage(1.0, "rand", 1);
  at::Tensor batch = at::ones({64, 3, 32, 32});
  Rng rng(1);
  rand_stage->apply(batch, rng);
  std::vector<double> values;
  for (int64_t i = 0; i < 64; ++i) {
    const Box b = erased_box(batch, i);
    REQUIRE(b.changed > 0);
    const at::Tensor region = batch[i].slice(1, b.top, b.top + b.height).slice(2, b.left, b.left + b.width);
    for (int64_t c = 0; c < 3; ++c) {
      const at::Tensor ch = region[c];
      CHECK(ch.eq(ch.flatten()[0]).all().item<bool>());
      values.push_back(ch.flatten()[0].item<double>());
    }
  }
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  CHECK(std::fabs(mean) < 0.3);

  auto pixel_stage = erasing_stage(1.0, "pixel", 1);
  batch = at::ones({64, 3, 32, 32});
  pixel_stage->apply(batch, rng);
  const at::Tensor erased = batch.masked_select(batch.ne(1.0));
  CHECK(erased.numel() > 64 * 3 * 20);
  CHECK(std::fabs(erased.mean().item<double>()) < 0.05);
  CHECK(std::fabs(erased.std().item<double>() - 1.0) < 0.05);
}

TEST_CASE("recount: up to that many boxes, each smaller; resplit keeps the first split clean; per-seed determinism") {
  auto multi = erasing_stage(1.0, "const", 3);
  at::Tensor batch = at::ones({300, 1, 64, 64});
  Rng rng(3);
  multi->apply(batch, rng);
  double mean_erased = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const int64_t changed = batch[i].eq(0).sum().item<int64_t>();
    CHECK(changed > 0);
    CHECK(changed <= 64 * 64 / 3 * 1.3);  // the area per box is scaled by 1 / count
    mean_erased += static_cast<double>(changed) / 300.0;
  }
  // Count 1..3 uniformly with the area divided by the count: about a sixth.
  CHECK(mean_erased > 64 * 64 * 0.1);
  CHECK(mean_erased < 64 * 64 * 0.25);

  auto split = erasing_stage(1.0, "const", 1, 2);
  at::Tensor b2 = at::ones({10, 3, 16, 16});
  split->apply(b2, rng);
  CHECK(b2.slice(0, 0, 5).eq(1).all().item<bool>());
  for (int64_t i = 5; i < 10; ++i) CHECK(b2[i].eq(0).any().item<bool>());

  auto pixel = erasing_stage(0.7, "pixel", 2);
  at::Tensor x = at::ones({8, 3, 24, 24}), y = at::ones({8, 3, 24, 24});
  Rng r1(11), r2(11);
  pixel->apply(x, r1);
  pixel->apply(y, r2);
  CHECK(x.equal(y));
}

TEST_CASE("bad settings are usage errors") {
  CHECK_THROWS_AS(erasing_stage(0.5, "noise", 1), UsageError);
  CHECK_THROWS_AS(erasing_stage(1.5, "const", 1), UsageError);
  CHECK_THROWS_AS(erasing_stage(0.5, "const", 0), UsageError);
}

}  // namespace test_random_erasing
