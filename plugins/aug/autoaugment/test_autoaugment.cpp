// --aa against timm: every AugmentOp (magnitude -> argument mapping and the op)
// at a sweep of magnitudes and both signs; the parsers (ops, probabilities,
// magnitudes, hparams, weights) and create_transform's reprs for RandAugment,
// AutoAugment and AugMix config strings; AugMix's mixing; and the random
// paths' invariants with our Rng.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "auto_augment.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/transform.hpp"
#include "timm/plugin/registry.hpp"

namespace test_autoaugment {

using namespace timm;
using namespace timm::autoaugment;

namespace {

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> v;
  if (text == "-" || text == "none") return v;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::strtod(item.c_str(), nullptr));
  return v;
}

// aug_oracle.py's level_hparams.
AugmentHparams level_hparams(const Image& img, Interpolation resample) {
  AugmentHparams hp;
  hp.translate_const = std::max<int64_t>(1, static_cast<int64_t>(std::min(img.height, img.width) * 0.45));
  hp.img_mean = img.channels == 3 ? std::vector<std::uint8_t>{124, 116, 104} : std::vector<std::uint8_t>{121};
  hp.interpolation = resample;
  return hp;
}

std::string compose_repr(const TransformPipeline& t) {
  const std::string r = t.repr();
  return r.substr(0, r.find("\nBatch("));
}

std::string interp_text(const std::optional<Interpolation>& i) {
  return i ? std::string(interpolation_name(*i)) : "random";
}

std::string float_text(double v) { return std::isinf(v) ? "inf" : python_float_repr(v); }

std::string hparams_text(const AugmentHparams& hp) {
  std::string mean;
  for (std::size_t i = 0; i < hp.img_mean.size(); ++i) mean += (i ? "," : "") + std::to_string(hp.img_mean[i]);
  return "tc=" + std::to_string(hp.translate_const) + " mean=" + mean + " interp=" + interp_text(hp.interpolation) +
         " tpct=" + float_text(hp.translate_pct) +
         " mstd=" + (hp.magnitude_std ? float_text(*hp.magnitude_std) : std::string("0")) +
         " mmax=" + (hp.magnitude_max ? std::to_string(*hp.magnitude_max) : std::string("None"));
}

std::string op_lines(const std::vector<AugmentOp>& ops) {
  std::string s;
  for (const auto& op : ops) {
    s += "\n" + op.name() + " p=" + float_text(op.prob()) + " m=" + float_text(op.magnitude()) + " " +
         hparams_text(op.hparams());
  }
  return s;
}

// aug_oracle.py's describe() for our objects.
std::string describe(const ImageTransform& t) {
  if (const auto* ra = dynamic_cast<const RandAugment*>(&t)) {
    std::string w;
    for (std::size_t i = 0; i < ra->choice_weights().size(); ++i) {
      w += (i ? "," : "") + python_float_repr(ra->choice_weights()[i]);
    }
    return "RandAugment\nn=" + std::to_string(ra->num_layers()) + " weights=" + (w.empty() ? "none" : w) +
           op_lines(ra->ops());
  }
  if (const auto* am = dynamic_cast<const AugMixAugment*>(&t)) {
    return "AugMixAugment\nalpha=" + float_text(am->alpha()) + " width=" + std::to_string(am->width()) +
           " depth=" + std::to_string(am->depth()) + " blended=" + std::to_string(am->blended() ? 1 : 0) +
           op_lines(am->ops());
  }
  const auto& aa = dynamic_cast<const AutoAugment&>(t);
  std::string sizes;
  std::vector<AugmentOp> all;
  for (const auto& sub : aa.policy()) {
    sizes += (sizes.empty() ? "" : ",") + std::to_string(sub.size());
    all.insert(all.end(), sub.begin(), sub.end());
  }
  return "AutoAugment\npolicy=" + sizes + op_lines(all);
}

TransformArgs train_args(const std::string& aa, int64_t h, int64_t w, const std::string& interp,
                         std::vector<double> mean) {
  TransformArgs args;
  args.is_training = true;
  args.input_size = {3, h, w};
  args.interpolation = interp;
  args.mean = std::move(mean);
  args.auto_augment = aa;
  return args;
}

// A real-sized test image with structure in every channel.
Image test_image(int64_t h, int64_t w) {
  Image img(h, w, 3);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      img.row(y)[x * 3] = static_cast<std::uint8_t>((x * 7 + y * 3) % 256);
      img.row(y)[x * 3 + 1] = static_cast<std::uint8_t>((x * x + y) % 200 + 20);
      img.row(y)[x * 3 + 2] = static_cast<std::uint8_t>(255 - (y * 5) % 256);
    }
  }
  return img;
}

}  // namespace

TEST_CASE("every AugmentOp equals timm's at each magnitude and sign (levels and pixels)") {
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"levels", dir.path().string()});
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int cases = 0, worst = 0, posterize_zero = 0;
  std::map<std::string, Image> inputs;
  std::unordered_set<std::string> names;
  Rng rng(0);
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string iname, name, resample, args_text, status, expected;
    int64_t h, w, c;
    double m;
    int negate;
    f >> iname >> h >> w >> c >> name >> m >> negate >> resample >> args_text >> status >> expected;
    if (!inputs.count(iname)) inputs[iname] = test::read_raw(dir / (iname + ".in"), h, w, c);
    const Image& img = inputs[iname];
    const Interpolation r = interpolation_from_name(resample);
    const AugmentOp op(name, 1.0, m, level_hparams(img, r));
    const double clipped = std::max(0.0, std::min(m, 10.0));
    const std::vector<double> args = op.level_args(clipped, negate != 0);
    const std::vector<double> want_args = parse_list(args_text);
    CHECK_MESSAGE(args == want_args, line);
    const Image got = op.apply_args(img, args, r, rng);
    const int d = test::max_diff(got.pixels, test::read_raw(dir / expected, h, w, c).pixels);
    CHECK_MESSAGE(d == 0, line << ": max difference " << d);
    worst = std::max(worst, d);
    posterize_zero += status == "pil_raises";
    names.insert(name);
    ++cases;
  }
  CHECK(cases > 1500);
  CHECK(names.size() == augment_op_names().size() - 1);  // all but GaussianBlurRand (checked in the parse case)
  MESSAGE("AugmentOp vs timm: " << cases << " cases over " << names.size() << " ops, max difference " << worst << "; "
                                << posterize_zero << " posterize(0) cases where Pillow 13 raises (we make black)");
}

TEST_CASE("--aa strings parse to timm's ops, probabilities, magnitudes and hparams; reprs match create_transform") {
  test::load_builtin_plugins();
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"parse", dir.path().string()});
  std::ifstream parse(dir / "parse.txt");
  std::string line;
  int ok = 0, bad = 0, levels = 0;
  while (std::getline(parse, line)) {
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (kind == "ok") {
      std::string cfg, interp, mean_text, repr_file, describe_file;
      int64_t h, w;
      f >> cfg >> h >> w >> interp >> mean_text >> repr_file >> describe_file;
      const TransformArgs args = train_args(cfg, h, w, interp, parse_list(mean_text));
      const TransformPipeline t = create_transform(args);
      CHECK_MESSAGE(compose_repr(t) == test::read_file(dir / repr_file), cfg);
      CHECK_MESSAGE(describe(*auto_augment_from_args(args)) == test::read_file(dir / describe_file), cfg);
      ++ok;
    } else if (kind == "raises") {
      std::string cfg;
      f >> cfg;
      CHECK_THROWS_AS_MESSAGE(create_transform(train_args(cfg, 224, 224, "bilinear", {0.485, 0.456, 0.406})),
                              UsageError, cfg);
      ++bad;
    } else if (kind == "accepted") {
      FAIL_CHECK("the oracle expected timm to refuse " << line);
    } else if (kind == "level") {
      std::string name, args_text;
      double m;
      f >> name >> m >> args_text;
      AugmentHparams hp;
      hp.translate_const = 100;
      const AugmentOp op(name, 1.0, m, hp);
      // The oracle's random.random() is 0.1: no sign flip.
      CHECK_MESSAGE(op.level_args(m, false) == parse_list(args_text), line);
      ++levels;
    }
  }
  CHECK(ok == 21);
  CHECK(bad == 8);
  CHECK(levels == 4 * static_cast<int>(augment_op_names().size()));
  MESSAGE("parsed " << ok << " --aa strings as timm, refused " << bad << " as timm, " << levels << " level mappings");
}

TEST_CASE("AugMix's mix and blended mix equal timm's for the same chains and weights") {
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"augmix", dir.path().string()});
  // aug_oracle.py's AUGMIX_CHAINS.
  struct Step {
    const char* name;
    double m;
    bool negate;
    Interpolation resample;
  };
  const std::vector<std::vector<Step>> chains = {
      {{"Rotate", 3, true, Interpolation::kBilinear}},
      {{"Equalize", 0, false, Interpolation::kBilinear}, {"ShearX", 5, false, Interpolation::kBicubic}},
      {{"PosterizeIncreasing", 5, false, Interpolation::kBilinear},
       {"SolarizeIncreasing", 7, false, Interpolation::kBilinear},
       {"TranslateXRel", 4, true, Interpolation::kBicubic}},
      {{"ColorIncreasing", 8, true, Interpolation::kBilinear}, {"AutoContrast", 0, false, Interpolation::kBilinear}},
  };
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int cases = 0, worst = 0;
  Rng rng(0);
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    std::string iname, weights_text, expected;
    int64_t h, w, c;
    int blended;
    double m;
    f >> iname >> h >> w >> c >> blended >> weights_text >> m >> expected;
    const Image img = test::read_raw(dir / (iname + ".in"), h, w, c);
    std::vector<Image> outs;
    for (const auto& chain : chains) {
      Image aug = img;
      for (const Step& s : chain) {
        const AugmentOp op(s.name, 1.0, s.m, level_hparams(img, s.resample));
        aug = op.apply_args(aug, op.level_args(s.m, s.negate), s.resample, rng);
      }
      outs.push_back(std::move(aug));
    }
    std::vector<float> weights;
    for (double x : parse_list(weights_text)) weights.push_back(static_cast<float>(x));
    const Image got = blended ? augmix_blend(img, outs, weights, static_cast<float>(m))
                              : augmix_mix(img, outs, weights, static_cast<float>(m));
    const int d = test::max_diff(got.pixels, test::read_raw(dir / expected, h, w, c).pixels);
    CHECK_MESSAGE(d == 0, line << ": max difference " << d);
    worst = std::max(worst, d);
    ++cases;
  }
  CHECK(cases >= 8);
  MESSAGE("AugMix mixing vs timm: " << cases << " cases, max difference " << worst);
}

TEST_CASE("random paths: deterministic per seed, size kept, p=0 is the identity, ops drawn over the whole set") {
  test::load_builtin_plugins();
  const Image src = test_image(64, 80);
  for (const char* cfg : {"rand-m9-mstd0.5-inc1", "rand-m9-tweights-n3", "rand-m9-t3a", "original", "v0r", "3a",
                          "augmix-m5-w4-d2", "augmix-m3-b1"}) {
    const auto t = auto_augment_from_args(train_args(cfg, 64, 80, "random", {0.485, 0.456, 0.406}));
    int changed = 0;
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      Image a = src, b = src;
      Rng r1(seed), r2(seed);
      t->apply(a, r1);
      t->apply(b, r2);
      REQUIRE(a.height == 64);
      REQUIRE(a.width == 80);
      REQUIRE(a.channels == 3);
      CHECK_MESSAGE(a.pixels == b.pixels, cfg);
      changed += a.pixels != src.pixels;
    }
    CHECK_MESSAGE(changed > 20, cfg << ": only " << changed << " of 40 images changed");
  }
  // p0: every op skipped.
  const auto never = auto_augment_from_args(train_args("rand-m9-n4-p0", 64, 80, "bilinear", {0.5}));
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    Image a = src;
    Rng r(seed);
    never->apply(a, r);
    CHECK(a.pixels == src.pixels);
  }
  // Colour jitter is kept with 3a only, as timm's create_transform.
  TransformArgs with_3a = train_args("3a", 64, 80, "bilinear", {0.485, 0.456, 0.406});
  CHECK(create_transform(with_3a).image.size() == 4);  // rrc, hflip, auto_augment, color_jitter
  TransformArgs with_rand = train_args("rand-m9", 64, 80, "bilinear", {0.485, 0.456, 0.406});
  CHECK(create_transform(with_rand).image.size() == 3);
}

namespace {

// A few synthetic samples, target = index.
class TinyDataset final : public Dataset {
 public:
  std::size_t size() const override { return 6; }
  Image image(std::size_t i) const override {
    Image img = test_image(40, 48);
    for (auto& v : img.pixels) v = static_cast<std::uint8_t>(v + 17 * i);
    return img;
  }
  int64_t target(std::size_t i) const override { return static_cast<int64_t>(i); }
  int64_t num_classes() const override { return 6; }
  std::string describe(std::size_t i) const override { return "tiny[" + std::to_string(i) + "]"; }
};

}  // namespace

TEST_CASE("--aug-splits: a clean split and augmented splits per sample, laid out as timm's fast_collate") {
  test::load_builtin_plugins();
  TransformArgs args = train_args("augmix-m5-w4-d2", 32, 32, "bilinear", {0.485, 0.456, 0.406});
  args.aug_splits = 3;
  const TransformPipeline t = create_transform(args);
  REQUIRE(t.num_splits() == 3);
  REQUIRE(t.secondary_begin == 2);  // rrc, hflip | auto_augment
  const Image src = test_image(40, 48);
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    Rng rng(seed);
    const std::vector<Image> parts = t.apply_splits(src, rng);
    REQUIRE(parts.size() == 3);
    // The clean split is the primary stages alone, with the same draws.
    Image clean = src;
    Rng again(seed);
    for (std::size_t i = 0; i < t.secondary_begin; ++i) t.image[i]->apply(clean, again);
    CHECK(parts[0].pixels == clean.pixels);
    CHECK(parts[1].pixels != clean.pixels);
    CHECK(parts[1].pixels != parts[2].pixels);
  }
  args.aug_splits = 1;
  CHECK_THROWS_AS(create_transform(args), UsageError);

  args.aug_splits = 3;
  LoaderOptions options;
  options.batch_size = 4;
  options.num_workers = 0;
  Loader loader(std::make_shared<TinyDataset>(), make_local_sampler(6, false, 0), create_transform(args), options);
  loader.start_epoch(0);
  auto batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK(batch->images.size(0) == 12);
  const std::vector<int64_t> want{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  for (int64_t r = 0; r < 12; ++r) CHECK(batch->targets[r].item<int64_t>() == want[r]);
  batch = loader.next();  // the last, smaller batch: rows k + j * 2
  REQUIRE(batch.has_value());
  CHECK(batch->images.size(0) == 6);
  CHECK(batch->targets[3].item<int64_t>() == 5);
}

namespace {

// The UsageError `config` gets from the parsers, or "" when it parses.
std::string refusal(const std::string& config) {
  try {
    (void)auto_augment_from_args(train_args(config, 32, 32, "bilinear", {0.485, 0.456, 0.406}));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

template <class T>
std::shared_ptr<const T> parsed(const std::string& config, const std::string& interp = "bilinear") {
  const auto t = std::dynamic_pointer_cast<const T>(
      auto_augment_from_args(train_args(config, 32, 32, interp, {0.485, 0.456, 0.406})));
  REQUIRE_MESSAGE(t != nullptr, config);
  return t;
}

// Applies `t` to a small image with a few seeds: the call ends and keeps the size.
void apply_a_few(const ImageTransform& t, const std::string& config) {
  const Image src = test_image(24, 20);
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Image img = src;
    Rng rng(seed);
    t.apply(img, rng);
    CHECK_MESSAGE((img.height == 24 && img.width == 20 && img.channels == 3), config);
  }
}

}  // namespace

TEST_CASE("--aa numbers out of range are refused, naming the string, the field, the value and the range") {
  struct Bad {
    const char* config;
    const char* key;
    const char* value;
    const char* range;
  };
  const char* n_range = "an integer from 0 to 100";
  const char* m_range = "an integer from 0 to 1000";
  const char* any_finite = "a finite number >= 0";
  const char* alpha_range = "a number from 0.1 to 1000";
  const Bad cases[] = {
      // The fuzzer's: 999999999999 ops per image (a hang), 10^11 chains (std::bad_alloc).
      {"rand-m9-n999999999999", "n", "999999999999", n_range},
      {"augmix-w99999999999-d99999999999", "w", "99999999999", "an integer from 1 to 16"},
      {"rand-n101", "n", "101", n_range},
      {"rand-n99999999999999999999", "n", "99999999999999999999", n_range},  // past int64
      {"rand-n1_0", "n", "1_0", n_range},                                    // Python's int() reads 10
      {"rand-m1001", "m", "1001", m_range},
      {"rand-m1e9", "m", "1e9", m_range},  // timm's int() refuses it too
      {"rand-m9-mmax1001", "mmax", "1001", m_range},
      {"rand-mstd1e999", "mstd", "1e999", any_finite},  // Python's float() makes inf
      {"rand-m9-p1e999", "p", "1e999", any_finite},
      {"rand-p0x1p3", "p", "0x1p3", any_finite},  // hex: float() refuses it
      {"rand-inc1x", "inc", "1x", "an integer"},
      {"augmix-w0", "w", "0", "an integer from 1 to 16"},
      {"augmix-w17", "w", "17", "an integer from 1 to 16"},
      {"augmix-m5-d17", "d", "17", "an integer from 0 to 16"},
      {"augmix-d99999999999", "d", "99999999999", "an integer from 0 to 16"},
      {"augmix-m1001", "m", "1001", m_range},
      {"augmix-a0.01", "a", "0.01", alpha_range},
      {"augmix-a1001", "a", "1001", alpha_range},
      {"augmix-a1e999", "a", "1e999", alpha_range},
      {"augmix-mstd1e999", "mstd", "1e999", any_finite},
      {"augmix-b1.5", "b", "1.5", "an integer"},
      {"original-mstd1e999", "mstd", "1e999", any_finite},
      {"v0-mstd0x10", "mstd", "0x10", any_finite},
  };
  for (const Bad& bad : cases) {
    const std::string message = refusal(bad.config);
    CHECK_MESSAGE(message.find("--aa '" + std::string(bad.config) + "': " + bad.key + " (") != std::string::npos,
                  bad.config << ": " << message);
    CHECK_MESSAGE(message.find("must be " + std::string(bad.range) + ", got '" + bad.value + "'") != std::string::npos,
                  bad.config << ": " << message);
  }
  // Through the registry, as timm-run builds it: still a UsageError (exit 2).
  test::load_builtin_plugins();
  for (const char* config : {"rand-m9-n999999999999", "augmix-w99999999999-d99999999999"}) {
    std::string message;
    try {
      (void)create_transform(train_args(config, 224, 224, "bilinear", {0.485, 0.456, 0.406}));
    } catch (const UsageError& e) {
      message = e.what();
    }
    CHECK_MESSAGE(message.find("--aa '" + std::string(config) + "'") != std::string::npos, config << ": " << message);
  }
}

TEST_CASE("--aa values cannot be negative: the number after a '-' is an unknown section, as in timm") {
  for (const char* config : {"rand-n-1", "rand-m9-mstd-1", "augmix-d-1", "v0-mstd-1"}) {
    const std::string message = refusal(config);
    CHECK_MESSAGE(message.find("'" + std::string(config) + "': unknown section '1'") != std::string::npos, message);
    CHECK_MESSAGE(message.find("no value can be negative") != std::string::npos, message);
  }
}

TEST_CASE("--aa edge values within the ranges keep timm's meaning and run") {
  const auto none = parsed<RandAugment>("rand-n0");
  CHECK(none->num_layers() == 0);
  const Image src = test_image(24, 20);
  Image img = src;
  Rng rng(0);
  none->apply(img, rng);
  CHECK(img.pixels == src.pixels);

  const auto many = parsed<RandAugment>("rand-m9-n100-mstd0.5");
  CHECK(many->num_layers() == 100);
  apply_a_few(*many, "rand-m9-n100-mstd0.5");

  // Magnitudes past the ceiling are timm's: kept as given, clipped at each call.
  CHECK(parsed<RandAugment>("rand-m30")->ops()[0].magnitude() == 30);
  CHECK(parsed<RandAugment>("rand-m0009")->ops()[0].magnitude() == 9);
  for (const auto& [config, mmax] :
       {std::pair{"rand-m1000-mmax1000-p1", 1000}, {"rand-m1000-mmax1000-p1-mstd101", 1000}, {"rand-m0-mmax0-p1", 0}}) {
    const auto t = parsed<RandAugment>(config, "nearest");
    CHECK(t->ops()[0].hparams().magnitude_max.value_or(-1) == mmax);
    apply_a_few(*t, config);
  }
  // p of 1 or more applies every op (timm's prob < 1.0 test); mstd above 100 is uniform.
  CHECK(parsed<RandAugment>("rand-p2")->ops()[0].prob() == 2.0);
  CHECK(parsed<RandAugment>("rand-mstd100")->ops()[0].hparams().magnitude_std == 100.0);
  CHECK(std::isinf(*parsed<RandAugment>("rand-mstd100.5")->ops()[0].hparams().magnitude_std));
  // inc and b are bool(int(value)): any length of digits.
  auto increasing = [](const std::string& config) {
    const auto t = parsed<RandAugment>(config);
    return std::any_of(t->ops().begin(), t->ops().end(),
                       [](const AugmentOp& op) { return op.name() == "PosterizeIncreasing"; });
  };
  CHECK(increasing("rand-inc99999999999999999999"));
  CHECK_FALSE(increasing("rand-inc00"));
  CHECK(parsed<AugMixAugment>("augmix-b2")->blended());
  CHECK_FALSE(parsed<AugMixAugment>("augmix-b000")->blended());

  // AugMix at the bounds: d0 is timm's random depth 1-3.
  for (const char* config : {"augmix-w16-d16", "augmix-w1-d0-a0.1", "augmix-m1000-a1000-b1", "augmix-mstd0"}) {
    apply_a_few(*parsed<AugMixAugment>(config), config);
  }
  const auto wide = parsed<AugMixAugment>("augmix-w16-d16-a0.1");
  CHECK(wide->width() == 16);
  CHECK(wide->depth() == 16);
  CHECK(wide->alpha() == 0.1);
  CHECK(parsed<AugMixAugment>("augmix-d0")->depth() == 0);
  CHECK(parsed<AutoAugment>("original-mstd0")->policy()[0][0].hparams().magnitude_std == 0.0);
}

}  // namespace test_autoaugment
