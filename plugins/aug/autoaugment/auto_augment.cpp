#include "auto_augment.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "pil_ops.hpp"
#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm::autoaugment {
namespace {

constexpr double kLevelDenom = 10.0;  // _LEVEL_DENOM

enum OpKind {
  kAutoContrast,
  kEqualize,
  kInvert,
  kRotate,
  kPosterize,
  kPosterizeIncreasing,
  kPosterizeOriginal,
  kSolarize,
  kSolarizeIncreasing,
  kSolarizeAdd,
  kColor,
  kColorIncreasing,
  kContrast,
  kContrastIncreasing,
  kBrightness,
  kBrightnessIncreasing,
  kSharpness,
  kSharpnessIncreasing,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kTranslateXRel,
  kTranslateYRel,
  kDesaturate,
  kGaussianBlur,
  kGaussianBlurRand,
  kNumOps
};

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {"AutoContrast",
                                                 "Equalize",
                                                 "Invert",
                                                 "Rotate",
                                                 "Posterize",
                                                 "PosterizeIncreasing",
                                                 "PosterizeOriginal",
                                                 "Solarize",
                                                 "SolarizeIncreasing",
                                                 "SolarizeAdd",
                                                 "Color",
                                                 "ColorIncreasing",
                                                 "Contrast",
                                                 "ContrastIncreasing",
                                                 "Brightness",
                                                 "BrightnessIncreasing",
                                                 "Sharpness",
                                                 "SharpnessIncreasing",
                                                 "ShearX",
                                                 "ShearY",
                                                 "TranslateX",
                                                 "TranslateY",
                                                 "TranslateXRel",
                                                 "TranslateYRel",
                                                 "Desaturate",
                                                 "GaussianBlur",
                                                 "GaussianBlurRand"};
  return names;
}

int op_kind(const std::string& name) {
  const auto& names = op_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw UsageError("unknown augmentation op " + in_quotes(name));
  return static_cast<int>(it - names.begin());
}

// _minmax_level_to_arg.
double minmax_level(double level, double lo, double hi) {
  level = level / kLevelDenom;
  level = lo + (hi - lo) * level;
  return std::max(lo, std::min(hi, level));
}

double py_random_negate(double v, bool negate) { return negate ? -v : v; }

// Python's repr of a magnitude that timm keeps as int or float.
std::string number_repr(double v, bool is_int) {
  if (is_int) return std::to_string(static_cast<int64_t>(v));
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return python_float_repr(v);
}

// ---- Numeric sections -------------------------------------------------------
//
// timm reads them with Python's int() and float(), unbounded, so a short
// string can ask for a hang or an unbounded allocation when the transform
// runs (rand-n999999999999: that many ops per image; augmix-w99999999999: that
// many chain images). Each section has a range that every recipe timm ships
// sits far inside; a value outside it is a UsageError before training. Where
// timm gives a large value a harmless meaning, it is kept: a magnitude above
// the ceiling is clipped at each call, p of 1 or more applies every op, any
// non-zero inc/b is on. '-' separates sections, so no value is negative.

struct IntSpec {
  const char* key;
  const char* what;
  int64_t lo, hi;
};

struct RealSpec {
  const char* key;
  const char* what;
  double lo, hi;  // hi infinite: any finite value from lo on
};

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// timm's recipes use 1-4 ops per image (n2, n3); 100 is 25x that and still
// ends.
constexpr IntSpec kRandLayers{"n", "ops per image", 0, 100};
// timm's magnitude scale is 0-10 (mmax lifts the ceiling, e.g. to TF's 30)
// and each call clips the magnitude to [0, mmax or 10], so m=30 stays legal.
// Capping both at 1000 keeps the ops' arguments (at most 100x their range at
// magnitude 10) far from int overflow in the pixel ops.
constexpr IntSpec kMagnitude{"m", "magnitude", 0, 1000};
constexpr IntSpec kMagnitudeMax{"mmax", "magnitude ceiling, 0: 10", 0, 1000};
// AugMix runs w chains of d ops (the paper and timm: w3, d1-3) and holds the
// w chain images at once: at most 16 x 16 ops and 16 copies per image. w0
// (timm mixes no chain: the image blended towards black) stays refused.
constexpr IntSpec kAugMixWidth{"w", "chains", 1, 16};
constexpr IntSpec kAugMixDepth{"d", "ops per chain, 0: 1-3 at random", 0, 16};
// Any finite noise is harmless (the magnitude is clipped after it); Python's
// float('1e999') is inf, which is refused rather than read as uniform.
constexpr RealSpec kMagnitudeStd{"mstd", "magnitude noise", 0, kUnbounded};
constexpr RealSpec kOpProb{"p", "probability of each op, 1 or more: always", 0, kUnbounded};
// AugMix's Dirichlet/Beta alpha is 1 in the paper and in timm. Below 0.1 the
// gamma draws (u^(1/alpha) for alpha < 1) start to underflow to 0, about one
// in 1700 at 0.01, and chains whose draws all do mix with 0/0 weights; above
// 1000 the mix is even anyway.
constexpr RealSpec kAugMixAlpha{"a", "Dirichlet/Beta alpha", 0.1, 1000};

[[noreturn]] void refuse_value(std::string_view config, const char* key, const char* what, const std::string& expected,
                               const std::string& value) {
  throw UsageError("--aa " + in_quotes(std::string(config)) + ": " + key + " (" + what + ") must be " + expected +
                   ", got " + in_quotes(value));
}

// Python's int() of a section value (its digits), within the spec's range.
int64_t parse_int(const std::string& value, const IntSpec& spec, std::string_view config) {
  int64_t v = 0;
  const char* end = value.data() + value.size();
  const auto [stop, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || stop != end || v < spec.lo || v > spec.hi) {
    refuse_value(config, spec.key, spec.what,
                 "an integer from " + std::to_string(spec.lo) + " to " + std::to_string(spec.hi), value);
  }
  return v;
}

std::string range_text(const RealSpec& spec) {
  std::ostringstream s;
  if (spec.hi == kUnbounded) {
    s << "a finite number >= " << spec.lo;
  } else {
    s << "a number from " << spec.lo << " to " << spec.hi;
  }
  return s.str();
}

// Python's float() of a section value: decimal only (from_chars' general
// format takes no hex, as float() takes none); overflow and out of range are
// refused.
double parse_real(const std::string& value, const RealSpec& spec, std::string_view config) {
  double v = 0;
  const char* end = value.data() + value.size();
  const auto [stop, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || stop != end || !std::isfinite(v) || v < spec.lo || v > spec.hi) {
    refuse_value(config, spec.key, spec.what, range_text(spec), value);
  }
  return v;
}

// bool(int(value)): any run of digits, however long (Python's int has no
// bound), is on unless all zeros.
bool parse_flag(const std::string& value, const char* key, std::string_view config) {
  if (value.find_first_not_of("0123456789") != std::string::npos) {
    refuse_value(config, key, "0: off, else on", "an integer", value);
  }
  return value.find_first_not_of('0') != std::string::npos;
}

// timm's assert on an unknown section. One that starts with a digit has no
// key: the value after a '-' inside a number ("n-1").
[[noreturn]] void refuse_section(const char* scheme, std::string_view config, const std::string& section,
                                 const char* expected) {
  std::string message = std::string(scheme) + " config " + in_quotes(std::string(config)) + ": unknown section " +
                        in_quotes(section) + "; expected " + expected;
  if (section.find_first_of("0123456789") == 0) message += " ('-' separates sections: no value can be negative)";
  throw UsageError(message);
}

std::vector<std::string> split_dashes(std::string_view s) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = s.find('-', start);
    parts.emplace_back(s.substr(start, dash == std::string_view::npos ? std::string_view::npos : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  return parts;
}

// re.split(r'(\d.*)', c)[:2]: the key before the first digit and the rest;
// nullopt when there is no digit (timm skips such sections).
std::optional<std::pair<std::string, std::string>> key_value(const std::string& section) {
  const std::size_t digit = section.find_first_of("0123456789");
  if (digit == std::string::npos) return std::nullopt;
  return std::pair{section.substr(0, digit), section.substr(digit)};
}

Interpolation draw_resample(const AugmentHparams& hp, Rng& rng) {
  if (hp.interpolation) return *hp.interpolation;
  return rng.randint(0, 1) == 0 ? Interpolation::kBilinear : Interpolation::kBicubic;
}

// Gamma(alpha, 1) draws normalised: numpy's dirichlet.
std::vector<double> dirichlet(double alpha, int64_t n, Rng& rng) {
  std::gamma_distribution<double> gamma(alpha, 1.0);
  std::vector<double> w(n);
  double sum = 0;
  for (auto& x : w) sum += (x = gamma(rng.engine()));
  for (auto& x : w) x /= sum;
  return w;
}

double beta(double a, double b, Rng& rng) {
  const double x = std::gamma_distribution<double>(a, 1.0)(rng.engine());
  const double y = std::gamma_distribution<double>(b, 1.0)(rng.engine());
  return x / (x + y);
}

// np.sum of a short float64 array: pairwise with eight accumulators from
// eight elements on (numpy's pairwise_sum below its 128-element block), so
// the normalised weights round as timm's.
double numpy_sum(const std::vector<double>& a) {
  const std::size_t n = a.size();
  if (n < 8) {
    double s = 0;  // numpy starts from -0.0; the same for these sums
    for (double x : a) s += x;
    return s;
  }
  double r[8];
  for (int j = 0; j < 8; ++j) r[j] = a[j];
  std::size_t i = 8;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) r[j] += a[i + j];
  }
  double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) s += a[i];
  return s;
}

// ---- The named policies (auto_augment_policy_*) ----------------------------

struct PolicyOp {
  const char* name;
  double prob;
  int magnitude;
};
using Policy = std::vector<std::vector<PolicyOp>>;

Policy policy_v0(bool research_posterize) {
  const char* posterize = research_posterize ? "PosterizeIncreasing" : "Posterize";
  return {
      {{"Equalize", 0.8, 1}, {"ShearY", 0.8, 4}},       {{"Color", 0.4, 9}, {"Equalize", 0.6, 3}},
      {{"Color", 0.4, 1}, {"Rotate", 0.6, 8}},          {{"Solarize", 0.8, 3}, {"Equalize", 0.4, 7}},
      {{"Solarize", 0.4, 2}, {"Solarize", 0.6, 2}},     {{"Color", 0.2, 0}, {"Equalize", 0.8, 8}},
      {{"Equalize", 0.4, 8}, {"SolarizeAdd", 0.8, 3}},  {{"ShearX", 0.2, 9}, {"Rotate", 0.6, 8}},
      {{"Color", 0.6, 1}, {"Equalize", 1.0, 2}},        {{"Invert", 0.4, 9}, {"Rotate", 0.6, 0}},
      {{"Equalize", 1.0, 9}, {"ShearY", 0.6, 3}},       {{"Color", 0.4, 7}, {"Equalize", 0.6, 0}},
      {{posterize, 0.4, 6}, {"AutoContrast", 0.4, 7}},  {{"Solarize", 0.6, 8}, {"Color", 0.6, 9}},
      {{"Solarize", 0.2, 4}, {"Rotate", 0.8, 9}},       {{"Rotate", 1.0, 7}, {"TranslateYRel", 0.8, 9}},
      {{"ShearX", 0.0, 0}, {"Solarize", 0.8, 4}},       {{"ShearY", 0.8, 0}, {"Color", 0.6, 4}},
      {{"Color", 1.0, 0}, {"Rotate", 0.6, 2}},          {{"Equalize", 0.8, 4}, {"Equalize", 0.0, 8}},
      {{"Equalize", 1.0, 4}, {"AutoContrast", 0.6, 2}}, {{"ShearY", 0.4, 7}, {"SolarizeAdd", 0.6, 7}},
      {{posterize, 0.8, 2}, {"Solarize", 0.6, 10}},     {{"Solarize", 0.6, 8}, {"Equalize", 0.6, 1}},
      {{"Color", 0.8, 6}, {"Rotate", 0.4, 5}},
  };
}

Policy policy_original(bool research_posterize) {
  const char* posterize = research_posterize ? "PosterizeIncreasing" : "PosterizeOriginal";
  return {
      {{posterize, 0.4, 8}, {"Rotate", 0.6, 9}},    {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, 5}},
      {{"Equalize", 0.8, 8}, {"Equalize", 0.6, 3}}, {{posterize, 0.6, 7}, {posterize, 0.6, 6}},
      {{"Equalize", 0.4, 7}, {"Solarize", 0.2, 4}}, {{"Equalize", 0.4, 4}, {"Rotate", 0.8, 8}},
      {{"Solarize", 0.6, 3}, {"Equalize", 0.6, 7}}, {{posterize, 0.8, 5}, {"Equalize", 1.0, 2}},
      {{"Rotate", 0.2, 3}, {"Solarize", 0.6, 8}},   {{"Equalize", 0.6, 8}, {posterize, 0.4, 6}},
      {{"Rotate", 0.8, 8}, {"Color", 0.4, 0}},      {{"Rotate", 0.4, 9}, {"Equalize", 0.6, 2}},
      {{"Equalize", 0.0, 7}, {"Equalize", 0.8, 8}}, {{"Invert", 0.6, 4}, {"Equalize", 1.0, 8}},
      {{"Color", 0.6, 4}, {"Contrast", 1.0, 8}},    {{"Rotate", 0.8, 8}, {"Color", 1.0, 2}},
      {{"Color", 0.8, 8}, {"Solarize", 0.8, 7}},    {{"Sharpness", 0.4, 7}, {"Invert", 0.6, 8}},
      {{"ShearX", 0.6, 5}, {"Equalize", 1.0, 9}},   {{"Color", 0.4, 0}, {"Equalize", 0.6, 3}},
      {{"Equalize", 0.4, 7}, {"Solarize", 0.2, 4}}, {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, 5}},
      {{"Invert", 0.6, 4}, {"Equalize", 1.0, 8}},   {{"Color", 0.6, 4}, {"Contrast", 1.0, 8}},
      {{"Equalize", 0.8, 8}, {"Equalize", 0.6, 3}},
  };
}

Policy policy_3a() {
  return {
      {{"Solarize", 1.0, 5}},
      {{"Desaturate", 1.0, 10}},
      {{"GaussianBlurRand", 1.0, 10}},
  };
}

// ---- RandAugment's op sets --------------------------------------------------

const std::vector<std::string> kRandTransforms = {
    "AutoContrast", "Equalize",   "Invert",    "Rotate", "Posterize", "Solarize",      "SolarizeAdd",  "Color",
    "Contrast",     "Brightness", "Sharpness", "ShearX", "ShearY",    "TranslateXRel", "TranslateYRel"};
const std::vector<std::string> kRandIncreasingTransforms = {"AutoContrast",
                                                            "Equalize",
                                                            "Invert",
                                                            "Rotate",
                                                            "PosterizeIncreasing",
                                                            "SolarizeIncreasing",
                                                            "SolarizeAdd",
                                                            "ColorIncreasing",
                                                            "ContrastIncreasing",
                                                            "BrightnessIncreasing",
                                                            "SharpnessIncreasing",
                                                            "ShearX",
                                                            "ShearY",
                                                            "TranslateXRel",
                                                            "TranslateYRel"};
const std::vector<std::string> kRand3a = {"SolarizeIncreasing", "Desaturate", "GaussianBlur"};
// Dicts keep insertion order in Python: the same order here.
const std::vector<std::pair<std::string, double>> kRandWeighted3a = {{"SolarizeIncreasing", 6},
                                                                     {"Desaturate", 6},
                                                                     {"GaussianBlur", 6},
                                                                     {"Rotate", 3},
                                                                     {"ShearX", 2},
                                                                     {"ShearY", 2},
                                                                     {"PosterizeIncreasing", 1},
                                                                     {"AutoContrast", 1},
                                                                     {"ColorIncreasing", 1},
                                                                     {"SharpnessIncreasing", 1},
                                                                     {"ContrastIncreasing", 1},
                                                                     {"BrightnessIncreasing", 1},
                                                                     {"Equalize", 1},
                                                                     {"Invert", 1}};
const std::vector<std::pair<std::string, double>> kRandWeighted0 = {{"Rotate", 3},
                                                                    {"ShearX", 2},
                                                                    {"ShearY", 2},
                                                                    {"TranslateXRel", 1},
                                                                    {"TranslateYRel", 1},
                                                                    {"ColorIncreasing", .25},
                                                                    {"SharpnessIncreasing", 0.25},
                                                                    {"AutoContrast", 0.25},
                                                                    {"SolarizeIncreasing", .05},
                                                                    {"SolarizeAdd", .05},
                                                                    {"ContrastIncreasing", .05},
                                                                    {"BrightnessIncreasing", .05},
                                                                    {"Equalize", .05},
                                                                    {"PosterizeIncreasing", 0.05},
                                                                    {"Invert", 0.05}};
const std::vector<std::string> kAugMixTransforms = {
    "AutoContrast", "ColorIncreasing", "ContrastIncreasing",  "BrightnessIncreasing", "SharpnessIncreasing",
    "Equalize",     "Rotate",          "PosterizeIncreasing", "SolarizeIncreasing",   "ShearX",
    "ShearY",       "TranslateXRel",   "TranslateYRel"};

}  // namespace

// ---- AugmentOp ---------------------------------------------------------------

const std::vector<std::string>& augment_op_names() { return op_names(); }

AugmentHparams augment_hparams(const TransformArgs& args, bool augmix) {
  AugmentHparams hp;
  if (args.input_size.size() != 3) throw UsageError("input size must be C,H,W");
  const int64_t size_min = std::min(args.input_size[1], args.input_size[2]);
  hp.translate_const = static_cast<int64_t>(static_cast<double>(size_min) * 0.45);
  hp.img_mean.clear();
  for (double m : args.mean)
    hp.img_mean.push_back(static_cast<std::uint8_t>(std::min<int64_t>(255, round_half_even(255 * m))));
  if (!args.interpolation.empty() && args.interpolation != "random") {
    hp.interpolation = interpolation_from_name(args.interpolation);
    if (*hp.interpolation != Interpolation::kNearest && *hp.interpolation != Interpolation::kBilinear &&
        *hp.interpolation != Interpolation::kBicubic) {
      throw UsageError("auto augmentation: PIL's affine transforms take nearest, bilinear or bicubic, not " +
                       in_quotes(args.interpolation));
    }
  }
  if (augmix) hp.translate_pct = 0.3;
  return hp;
}

AugmentOp::AugmentOp(std::string name, double prob, double magnitude, const AugmentHparams& hparams,
                     bool magnitude_is_int)
    : name_(std::move(name)),
      prob_(prob),
      magnitude_(magnitude),
      magnitude_is_int_(magnitude_is_int),
      hparams_(hparams),
      kind_(op_kind(name_)) {}

bool AugmentOp::signed_level() const {
  switch (kind_) {
    case kRotate:
    case kColorIncreasing:
    case kContrastIncreasing:
    case kBrightnessIncreasing:
    case kSharpnessIncreasing:
    case kShearX:
    case kShearY:
    case kTranslateX:
    case kTranslateY:
    case kTranslateXRel:
    case kTranslateYRel:
      return true;
    default:
      return false;
  }
}

bool AugmentOp::geometric() const {
  return kind_ == kRotate || kind_ == kShearX || kind_ == kShearY || kind_ == kTranslateX || kind_ == kTranslateY ||
         kind_ == kTranslateXRel || kind_ == kTranslateYRel;
}

std::vector<double> AugmentOp::level_args(double level, bool negate) const {
  const double l = level / kLevelDenom;
  switch (kind_) {
    case kAutoContrast:
    case kEqualize:
    case kInvert:
      return {};
    case kRotate:
      return {py_random_negate(l * 30.0, negate)};
    case kPosterize:
      return {static_cast<double>(static_cast<int64_t>(l * 4))};
    case kPosterizeIncreasing:
      return {4.0 - static_cast<double>(static_cast<int64_t>(l * 4))};
    case kPosterizeOriginal:
      return {static_cast<double>(static_cast<int64_t>(l * 4) + 4)};
    case kSolarize:
      return {static_cast<double>(std::min<int64_t>(256, static_cast<int64_t>(l * 256)))};
    case kSolarizeIncreasing:
      return {256.0 - static_cast<double>(std::min<int64_t>(256, static_cast<int64_t>(l * 256)))};
    case kSolarizeAdd:
      return {static_cast<double>(std::min<int64_t>(128, static_cast<int64_t>(l * 110)))};
    case kColor:
    case kContrast:
    case kBrightness:
    case kSharpness:
      return {l * 1.8 + 0.1};
    case kColorIncreasing:
    case kContrastIncreasing:
    case kBrightnessIncreasing:
    case kSharpnessIncreasing:
      return {std::max(0.1, 1.0 + py_random_negate(l * .9, negate))};
    case kShearX:
    case kShearY:
      return {py_random_negate(l * 0.3, negate)};
    case kTranslateX:
    case kTranslateY:
      return {py_random_negate(l * static_cast<double>(hparams_.translate_const), negate)};
    case kTranslateXRel:
    case kTranslateYRel:
      return {py_random_negate(l * hparams_.translate_pct, negate)};
    case kDesaturate:
      return {minmax_level(level, 0.5, 1.0)};
    case kGaussianBlur:
      return {minmax_level(level, 0.1, 2.0)};
    case kGaussianBlurRand:
      return {minmax_level(level, 0.0, 1.0)};
  }
  return {};
}

Image AugmentOp::apply_args(const Image& image, const std::vector<double>& args, Interpolation resample,
                            Rng& rng) const {
  const std::vector<std::uint8_t>& fill = hparams_.img_mean;
  const double a = args.empty() ? 0.0 : args[0];
  Image out = image;
  switch (kind_) {
    case kAutoContrast:
      autocontrast(out);
      break;
    case kEqualize:
      equalize(out);
      break;
    case kInvert:
      invert(out);
      break;
    case kRotate:
      return rotate(image, a, resample, fill);
    case kPosterize:
    case kPosterizeIncreasing:
    case kPosterizeOriginal:
      posterize(out, static_cast<int>(a));
      break;
    case kSolarize:
    case kSolarizeIncreasing:
      solarize(out, static_cast<int>(a));
      break;
    case kSolarizeAdd:
      solarize_add(out, static_cast<int>(a));
      break;
    case kColor:
    case kColorIncreasing:
      adjust_saturation(out, a);
      break;
    case kContrast:
    case kContrastIncreasing:
      adjust_contrast(out, a);
      break;
    case kBrightness:
    case kBrightnessIncreasing:
      adjust_brightness(out, a);
      break;
    case kSharpness:
    case kSharpnessIncreasing:
      adjust_sharpness(out, a);
      break;
    case kShearX:
      return shear_x(image, a, resample, fill);
    case kShearY:
      return shear_y(image, a, resample, fill);
    case kTranslateX:
      return translate_x(image, a, resample, fill);
    case kTranslateY:
      return translate_y(image, a, resample, fill);
    case kTranslateXRel:
      return translate_x(image, a * static_cast<double>(image.width), resample, fill);
    case kTranslateYRel:
      return translate_y(image, a * static_cast<double>(image.height), resample, fill);
    case kDesaturate:
      adjust_saturation(out, std::min(1.0, std::max(0.0, 1.0 - a)));
      break;
    case kGaussianBlur:
      return gaussian_blur(image, a);
    case kGaussianBlurRand:
      return gaussian_blur(image, rng.uniform(0.1, 2.0 * a));
  }
  return out;
}

void AugmentOp::apply(Image& image, Rng& rng) const {
  // random.random() > prob skips the op.
  if (prob_ < 1.0 && rng.uniform() > prob_) return;
  double magnitude = magnitude_;
  const double mstd = hparams_.magnitude_std.value_or(0.0);
  if (mstd > 0) {
    if (std::isinf(mstd)) {
      magnitude = rng.uniform(0, magnitude);
    } else {
      magnitude = std::normal_distribution<double>(magnitude, mstd)(rng.engine());
    }
  }
  const double upper =
      hparams_.magnitude_max.value_or(0) != 0 ? static_cast<double>(*hparams_.magnitude_max) : kLevelDenom;
  magnitude = std::max(0.0, std::min(magnitude, upper));
  const bool negate = signed_level() && rng.uniform() > 0.5;
  const std::vector<double> args = level_args(magnitude, negate);
  const Interpolation resample = geometric() ? draw_resample(hparams_, rng) : Interpolation::kBilinear;
  image = apply_args(image, args, resample, rng);
}

std::string AugmentOp::repr() const {
  std::string s = "AugmentOp(name=" + name_ + ", p=" + python_float_repr(prob_) +
                  ", m=" + number_repr(magnitude_, magnitude_is_int_) + ", mstd=";
  s += hparams_.magnitude_std ? number_repr(*hparams_.magnitude_std, false) : "0";
  if (hparams_.magnitude_max) s += ", mmax=" + std::to_string(*hparams_.magnitude_max);
  return s + ")";
}

// ---- RandAugment ---------------------------------------------------------------

RandAugment::RandAugment(std::vector<AugmentOp> ops, int64_t num_layers, std::vector<double> choice_weights)
    : ops_(std::move(ops)), num_layers_(num_layers), choice_weights_(std::move(choice_weights)) {
  if (ops_.empty()) throw UsageError("RandAugment needs at least one op");
  if (num_layers_ < 0) throw UsageError("RandAugment: the number of layers (n) must be >= 0");
  if (!choice_weights_.empty()) {
    const auto nonzero = std::count_if(choice_weights_.begin(), choice_weights_.end(), [](double w) { return w > 0; });
    // np.random.choice without replacement needs that many ops of non-zero weight.
    if (num_layers_ > nonzero) {
      throw UsageError("RandAugment: n=" + std::to_string(num_layers_) + " is more than the " +
                       std::to_string(nonzero) + " weighted ops");
    }
  }
}

void RandAugment::apply(Image& image, Rng& rng) const {
  std::vector<std::size_t> chosen;
  if (choice_weights_.empty()) {
    for (int64_t i = 0; i < num_layers_; ++i) {
      chosen.push_back(static_cast<std::size_t>(rng.randint(0, static_cast<int64_t>(ops_.size()) - 1)));
    }
  } else {
    // Weighted, without replacement: each draw renormalises over the rest.
    std::vector<double> w = choice_weights_;
    for (int64_t i = 0; i < num_layers_; ++i) {
      double total = 0;
      for (double x : w) total += x;
      double u = rng.uniform(0, total);
      std::size_t k = 0, last_nonzero = 0;
      for (; k < w.size(); ++k) {
        if (w[k] <= 0) continue;
        last_nonzero = k;
        if (u < w[k]) break;
        u -= w[k];
      }
      if (k == w.size()) k = last_nonzero;  // rounding at the top end
      chosen.push_back(k);
      w[k] = 0;
    }
  }
  for (std::size_t k : chosen) ops_[k].apply(image, rng);
}

std::string RandAugment::repr() const {
  std::string s = "RandAugment(n=" + std::to_string(num_layers_) + ", ops=";
  for (const auto& op : ops_) s += "\n\t" + op.repr();
  return s + ")";
}

// ---- AutoAugment ----------------------------------------------------------------

AutoAugment::AutoAugment(std::vector<std::vector<AugmentOp>> policy) : policy_(std::move(policy)) {
  if (policy_.empty()) throw UsageError("AutoAugment needs a non-empty policy");
}

void AutoAugment::apply(Image& image, Rng& rng) const {
  const auto& sub_policy = policy_[static_cast<std::size_t>(rng.randint(0, static_cast<int64_t>(policy_.size()) - 1))];
  for (const auto& op : sub_policy) op.apply(image, rng);
}

std::string AutoAugment::repr() const {
  std::string s = "AutoAugment(policy=";
  for (const auto& sub : policy_) {
    s += "\n\t[";
    for (std::size_t i = 0; i < sub.size(); ++i) s += (i ? ", " : "") + sub[i].repr();
    s += "]";
  }
  return s + ")";
}

// ---- AugMix ----------------------------------------------------------------------

AugMixAugment::AugMixAugment(std::vector<AugmentOp> ops, double alpha, int64_t width, int64_t depth, bool blended)
    : ops_(std::move(ops)), alpha_(alpha), width_(width), depth_(depth), blended_(blended) {
  if (alpha_ <= 0) throw UsageError("AugMix: alpha (a) must be > 0");
  if (width_ < 1) throw UsageError("AugMix: width (w) must be >= 1");
}

Image augmix_mix(const Image& image, const std::vector<Image>& chains, const std::vector<float>& weights, float m) {
  TORCH_CHECK(chains.size() == weights.size(), "augmix_mix: one weight per chain");
  std::vector<float> mixed(image.pixels.size(), 0.0f);
  for (std::size_t k = 0; k < chains.size(); ++k) {
    const auto& px = chains[k].pixels;
    TORCH_CHECK(px.size() == mixed.size(), "augmix_mix: chain ", k, " changed the image size");
    for (std::size_t i = 0; i < mixed.size(); ++i) mixed[i] += weights[k] * static_cast<float>(px[i]);
  }
  Image mix(image.height, image.width, image.channels);
  for (std::size_t i = 0; i < mixed.size(); ++i) {
    mix.pixels[i] = static_cast<std::uint8_t>(std::clamp(mixed[i], 0.0f, 255.0f));
  }
  // Image.blend(image, mixed, m) = image + m * (mixed - image).
  const float alpha = m;
  const bool interpolating = alpha >= 0.0f && alpha <= 1.0f;
  for (std::size_t i = 0; i < mixed.size(); ++i) {
    const int a = image.pixels[i];
    const float v = static_cast<float>(a) + alpha * static_cast<float>(mix.pixels[i] - a);
    mix.pixels[i] = interpolating ? static_cast<std::uint8_t>(v)
                                  : (v <= 0.0f ? 0 : (v >= 255.0f ? 255 : static_cast<std::uint8_t>(v)));
  }
  return mix;
}

Image augmix_blend(const Image& image, const std::vector<Image>& chains, const std::vector<float>& weights, float m) {
  TORCH_CHECK(chains.size() == weights.size(), "augmix_blend: one weight per chain");
  // _calc_blended_weights in float32.
  std::vector<float> ws(weights.size());
  float cump = 1.0f;
  for (std::size_t k = weights.size(); k-- > 0;) {
    const float w = weights[k] * m;
    const float alpha = w / cump;
    cump *= (1.0f - alpha);
    ws[k] = alpha;
  }
  Image acc = image;
  for (std::size_t k = 0; k < chains.size(); ++k) {
    const float alpha = ws[k];
    const bool interpolating = alpha >= 0.0f && alpha <= 1.0f;
    for (std::size_t i = 0; i < acc.pixels.size(); ++i) {
      const int a = acc.pixels[i];
      const float v = static_cast<float>(a) + alpha * static_cast<float>(chains[k].pixels[i] - a);
      acc.pixels[i] = interpolating ? static_cast<std::uint8_t>(v)
                                    : (v <= 0.0f ? 0 : (v >= 255.0f ? 255 : static_cast<std::uint8_t>(v)));
    }
  }
  return acc;
}

void AugMixAugment::apply(Image& image, Rng& rng) const {
  std::vector<float> weights;
  for (double w : dirichlet(alpha_, width_, rng)) weights.push_back(static_cast<float>(w));
  const float m = static_cast<float>(beta(alpha_, alpha_, rng));
  std::vector<Image> chains;
  for (int64_t k = 0; k < width_; ++k) {
    const int64_t depth = depth_ > 0 ? depth_ : rng.randint(1, 3);
    Image aug = image;
    for (int64_t d = 0; d < depth; ++d) {
      ops_[static_cast<std::size_t>(rng.randint(0, static_cast<int64_t>(ops_.size()) - 1))].apply(aug, rng);
    }
    chains.push_back(std::move(aug));
  }
  image = blended_ ? augmix_blend(image, chains, weights, m) : augmix_mix(image, chains, weights, m);
}

std::string AugMixAugment::repr() const {
  std::string s = "AugMixAugment(alpha=" + python_float_repr(alpha_) + ", width=" + std::to_string(width_) +
                  ", depth=" + std::to_string(depth_) + ", ops=";
  for (const auto& op : ops_) s += "\n\t" + op.repr();
  return s + ")";
}

// ---- Parsers -----------------------------------------------------------------------

std::shared_ptr<RandAugment> rand_augment_transform(std::string_view config, AugmentHparams hparams) {
  double magnitude = kLevelDenom;
  bool magnitude_is_int = false;
  int64_t num_layers = 2;
  bool increasing = false;
  double prob = 0.5;
  std::optional<std::string> transforms;
  const std::vector<std::string> sections = split_dashes(config);
  if (sections[0] != "rand") {
    throw UsageError("RandAugment config " + in_quotes(std::string(config)) + " must start with 'rand'");
  }
  for (std::size_t i = 1; i < sections.size(); ++i) {
    const std::string& c = sections[i];
    if (!c.empty() && c[0] == 't') {
      if (!transforms) transforms = c.substr(1);
      continue;
    }
    const auto kv = key_value(c);
    if (!kv) continue;
    const auto& [key, val] = *kv;
    if (key == "mstd") {
      double mstd = parse_real(val, kMagnitudeStd, config);
      if (mstd > 100) mstd = std::numeric_limits<double>::infinity();
      if (!hparams.magnitude_std) hparams.magnitude_std = mstd;
    } else if (key == "mmax") {
      // Parsed even when hparams hold one: timm's setdefault evaluates int(val) first.
      const int64_t mmax = parse_int(val, kMagnitudeMax, config);
      if (!hparams.magnitude_max) hparams.magnitude_max = mmax;
    } else if (key == "inc") {
      increasing = parse_flag(val, "inc", config);
    } else if (key == "m") {
      magnitude = static_cast<double>(parse_int(val, kMagnitude, config));
      magnitude_is_int = true;
    } else if (key == "n") {
      num_layers = parse_int(val, kRandLayers, config);
    } else if (key == "p") {
      prob = parse_real(val, kOpProb, config);
    } else {
      refuse_section("RandAugment", config, c, "m, n, mstd, mmax, inc, p or t<set>");
    }
  }
  // rand_augment_choices.
  std::vector<std::string> names = increasing ? kRandIncreasingTransforms : kRandTransforms;
  std::vector<double> weights;
  auto use_weighted = [&](const std::vector<std::pair<std::string, double>>& table) {
    names.clear();
    std::vector<double> raw;
    for (const auto& [n, w] : table) raw.push_back(w);
    const double total = numpy_sum(raw);
    for (const auto& [n, w] : table) {
      names.push_back(n);
      weights.push_back(w / total);
    }
  };
  if (transforms == "weights") {
    use_weighted(kRandWeighted0);
  } else if (transforms == "3aw") {
    use_weighted(kRandWeighted3a);
  } else if (transforms == "3a") {
    names = kRand3a;
  }
  std::vector<AugmentOp> ops;
  for (const auto& n : names) ops.emplace_back(n, prob, magnitude, hparams, magnitude_is_int);
  return std::make_shared<RandAugment>(std::move(ops), num_layers, std::move(weights));
}

std::shared_ptr<AutoAugment> auto_augment_transform(std::string_view config, AugmentHparams hparams) {
  const std::vector<std::string> sections = split_dashes(config);
  for (std::size_t i = 1; i < sections.size(); ++i) {
    const auto kv = key_value(sections[i]);
    if (!kv) continue;
    if (kv->first != "mstd") refuse_section("AutoAugment", config, sections[i], "mstd<float>");
    const double mstd = parse_real(kv->second, kMagnitudeStd, config);
    if (!hparams.magnitude_std) hparams.magnitude_std = mstd;
  }
  const std::string& name = sections[0];
  Policy policy;
  if (name == "original") {
    policy = policy_original(false);
  } else if (name == "originalr") {
    policy = policy_original(true);
  } else if (name == "v0") {
    policy = policy_v0(false);
  } else if (name == "v0r") {
    policy = policy_v0(true);
  } else if (name == "3a") {
    policy = policy_3a();
  } else {
    throw UsageError("unknown AutoAugment policy " + in_quotes(name) +
                     " in --aa; expected original, originalr, v0, v0r, 3a, rand-... or augmix-...");
  }
  std::vector<std::vector<AugmentOp>> ops;
  for (const auto& sub : policy) {
    std::vector<AugmentOp> sub_ops;
    for (const auto& p : sub) sub_ops.emplace_back(p.name, p.prob, static_cast<double>(p.magnitude), hparams, true);
    ops.push_back(std::move(sub_ops));
  }
  return std::make_shared<AutoAugment>(std::move(ops));
}

std::shared_ptr<AugMixAugment> augment_and_mix_transform(std::string_view config, AugmentHparams hparams) {
  int64_t magnitude = 3, width = 3, depth = -1;
  double alpha = 1.0;
  bool blended = false;
  const std::vector<std::string> sections = split_dashes(config);
  if (sections[0] != "augmix") {
    throw UsageError("AugMix config " + in_quotes(std::string(config)) + " must start with 'augmix'");
  }
  for (std::size_t i = 1; i < sections.size(); ++i) {
    const std::string& c = sections[i];
    const auto kv = key_value(c);
    if (!kv) continue;
    const auto& [key, val] = *kv;
    if (key == "mstd") {
      const double mstd = parse_real(val, kMagnitudeStd, config);
      if (!hparams.magnitude_std) hparams.magnitude_std = mstd;
    } else if (key == "m") {
      magnitude = parse_int(val, kMagnitude, config);
    } else if (key == "w") {
      width = parse_int(val, kAugMixWidth, config);
    } else if (key == "d") {
      depth = parse_int(val, kAugMixDepth, config);
    } else if (key == "a") {
      alpha = parse_real(val, kAugMixAlpha, config);
    } else if (key == "b") {
      blended = parse_flag(val, "b", config);
    } else {
      refuse_section("AugMix", config, c, "m, w, d, a, b or mstd");
    }
  }
  if (!hparams.magnitude_std) hparams.magnitude_std = std::numeric_limits<double>::infinity();
  std::vector<AugmentOp> ops;
  for (const auto& n : kAugMixTransforms) ops.emplace_back(n, 1.0, static_cast<double>(magnitude), hparams, true);
  return std::make_shared<AugMixAugment>(std::move(ops), alpha, width, depth, blended);
}

std::shared_ptr<ImageTransform> auto_augment_from_args(const TransformArgs& args) {
  const std::string& aa = args.auto_augment;
  if (aa.rfind("rand", 0) == 0) return rand_augment_transform(aa, augment_hparams(args, false));
  if (aa.rfind("augmix", 0) == 0) return augment_and_mix_transform(aa, augment_hparams(args, true));
  return auto_augment_transform(aa, augment_hparams(args, false));
}

}  // namespace timm::autoaugment
