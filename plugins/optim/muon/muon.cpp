// "muon", "nmuon", "adamuon", "nadamuon": timm.optim.Muon (MomentUm
// Orthogonalized by Newton-Schulz). A parameter that timm's
// _is_suitable_for_muon accepts (two or more non-unit dims, no leading unit
// dim, both dims of its (out, in * spatial) matrix at least 4, aspect ratio
// at most 128) takes a momentum step whose update is orthogonalised by
// Newton-Schulz iterations in bfloat16 (algo 'muon'), or that update scaled
// by its own second moment (algo 'adamuon', AdaMuon); the rest (biases,
// norms, position embeddings, small matrices) take timm's AdamW step
// (NAdamW with nesterov) with lr * fallback_lr_scale. Tensor by tensor in
// timm's order of ATen ops (its single-tensor path, the one it runs on the
// CPU), so that the bfloat16 matrix products see the same inputs. Where
// this CPU multiplies float32 matrices faster than bfloat16 ones (no AMX),
// the products run in float32 on the same bfloat16 values, rounded to
// bfloat16 (--opt-kwargs ns_matmul_dtype, timm-cpp's; docs/optimizers.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/dist/world.hpp"
#include "timm/log/log.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Coefficient = std::array<double, 3>;

// timm's _COEFFICIENTS.
const std::map<std::string, std::vector<Coefficient>>& coefficient_presets() {
  static const std::map<std::string, std::vector<Coefficient>> presets = {
      {"original", {{3.4445, -4.7750, 2.0315}}},
      {"quintic",
       {{4.0848, -6.8946, 2.9270},
        {3.9505, -6.3029, 2.6377},
        {3.7418, -5.5913, 2.3037},
        {2.8769, -3.1427, 1.2046},
        {2.8366, -3.0525, 1.2012}}},
      {"polar_express",
       {{8.237312490495555, -23.157747414558198, 16.680568411445915},
        {4.082441999064835, -2.893047735332586, 0.5252849256975648},
        {3.9263479922546582, -2.8547468034765298, 0.5318022422894988},
        {3.2982187133085143, -2.424541981026706, 0.48632008358844075},
        {2.2970369434552573, -1.63662558125903, 0.4002628455953627},
        {1.8763805351440397, -1.2347896577722228, 0.35891887501668385},
        {1.8564423485617974, -1.2132449880935525, 0.3568003487825883},
        {1.8749994008682747, -1.2499988017229169, 0.3749994008546422}}},
      {"polar_express_safer",
       {{8.156554524902461, -22.48329292557795, 15.878769915207462},
        {4.0429299351667245, -2.808917465908704, 0.5000178451051299},
        {3.8916678022926563, -2.7724841532176825, 0.5060648178503389},
        {3.285753657755658, -2.3681294933425394, 0.46449024233003117},
        {2.3005307116270983, -1.6111665557258408, 0.3833374427545273},
        {1.8631210546382593, -1.2042160621002727, 0.3421879560523383},
        {1.8382572152247512, -1.1779263289537742, 0.3396513038637379},
        {1.8749999923301852, -1.2499999836060613, 0.374999991275876}}},
  };
  return presets;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// ---- --opt-kwargs literals ---------------------------------------------------

// A Python literal of numbers, tuples and lists (ast.literal_eval), enough
// for ns_coefficients: kept to print it as Python's str() does in the log
// line and to resolve it as timm's resolve_ns_coefficients.
struct Literal {
  bool sequence = false;
  bool tuple = false;    // () rather than []
  bool integer = false;  // a number written without a point or exponent
  double number = 0.0;
  std::vector<Literal> items;

  std::string str() const {
    if (!sequence) return integer ? std::to_string(static_cast<long long>(number)) : python_float_repr(number);
    std::string out = tuple ? "(" : "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].str();
    if (tuple && items.size() == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
};

class LiteralParser {
 public:
  explicit LiteralParser(std::string text) : s_(std::move(text)) {}

  // The literal, or nullopt when `s_` is not one of numbers, tuples and lists.
  std::optional<Literal> parse() {
    std::optional<Literal> value;
    skip();
    // "a, b, c" without brackets is a tuple, as Python reads it.
    if (pos_ < s_.size() && s_[pos_] != '(' && s_[pos_] != '[' && s_.find(',') != std::string::npos) {
      s_ = "(" + s_ + ")";
    }
    value = parse_value();
    skip();
    if (!value || pos_ != s_.size()) return std::nullopt;
    return value;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }

  std::optional<Literal> parse_value() {
    skip();
    if (pos_ >= s_.size()) return std::nullopt;
    const char open = s_[pos_];
    if (open == '(' || open == '[') {
      const char close = open == '(' ? ')' : ']';
      ++pos_;
      Literal seq;
      seq.sequence = true;
      seq.tuple = open == '(';
      bool comma = false;  // the last item was followed by a comma
      for (;;) {
        skip();
        if (pos_ < s_.size() && s_[pos_] == close) {
          ++pos_;
          break;
        }
        if (!seq.items.empty() && !comma) return std::nullopt;
        std::optional<Literal> item = parse_value();
        if (!item) return std::nullopt;
        seq.items.push_back(std::move(*item));
        skip();
        comma = pos_ < s_.size() && s_[pos_] == ',';
        if (comma) ++pos_;
      }
      // "(x)" is x, "(x,)" a tuple.
      if (seq.tuple && seq.items.size() == 1 && !comma) return seq.items[0];
      return seq;
    }
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ')' && s_[pos_] != ']' && s_[pos_] != ' ' &&
           s_[pos_] != '\t') {
      ++pos_;
    }
    return parse_number(s_.substr(start, pos_ - start));
  }

  static std::optional<Literal> parse_number(const std::string& token) {
    if (token.empty()) return std::nullopt;
    Literal out;
    std::size_t digits = token[0] == '-' || token[0] == '+' ? 1 : 0;
    out.integer = digits < token.size() && token.find_first_not_of("0123456789", digits) == std::string::npos;
    if (token.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
    char* end = nullptr;
    out.number = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) return std::nullopt;
    return out;
  }

  std::string s_;
  std::size_t pos_ = 0;
};

// A string argument as ParseKwargs gives it (quotes optional); nullopt for
// None.
std::optional<std::string> string_kwarg(const OptimizerArgs& args, const std::string& key,
                                        const std::optional<std::string>& fallback) {
  const auto it = args.kwargs.find(key);
  if (it == args.kwargs.end()) return fallback;
  std::string s = trim(it->second);
  if (s == "None") return std::nullopt;
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

// ns_coefficients: a preset name, a triple or a list of triples, resolved as
// timm's resolve_ns_coefficients; with its str() for the log line.
struct NsCoefficients {
  std::vector<Coefficient> values;
  std::string str;
};

NsCoefficients resolve_ns_coefficients(const OptimizerArgs& args) {
  const std::string where = "optimizer " + in_quotes(args.opt) + ": --opt-kwargs ns_coefficients";
  const auto it = args.kwargs.find("ns_coefficients");
  const std::string raw = it == args.kwargs.end() ? "quintic" : trim(it->second);
  const std::string usage = "expected a preset name (" + [] {
    std::string names;
    for (const auto& [name, _] : coefficient_presets()) names += (names.empty() ? "" : ", ") + name;
    return names;
  }() + "), a triple (a, b, c) or a list of triples";
  std::optional<Literal> literal = LiteralParser(raw).parse();
  if (!literal) {
    // Not a literal of numbers: a preset name, as ParseKwargs keeps a bare word.
    const std::optional<std::string> name = string_kwarg(args, "ns_coefficients", std::string("quintic"));
    if (!name) throw UsageError(where + "=None: " + usage);
    const auto preset = coefficient_presets().find(*name);
    if (preset == coefficient_presets().end()) {
      throw UsageError(where + ": unknown coefficients preset " + in_quotes(*name) + ", " + usage);
    }
    return {preset->second, *name};
  }
  if (!literal->sequence) throw UsageError(where + "=" + raw + ": " + usage);
  auto as_coeff = [&](const Literal& item) {
    const bool ok = item.sequence && item.items.size() == 3 &&
                    std::none_of(item.items.begin(), item.items.end(), [](const Literal& v) { return v.sequence; });
    if (!ok) throw UsageError(where + ": coefficient must be length-3 of real numbers, got " + item.str());
    return Coefficient{item.items[0].number, item.items[1].number, item.items[2].number};
  };
  NsCoefficients out;
  out.str = literal->str();
  const auto& items = literal->items;
  if (items.size() == 3 && std::none_of(items.begin(), items.end(), [](const Literal& v) { return v.sequence; })) {
    out.values.push_back(as_coeff(*literal));  // a single triple
    return out;
  }
  for (const Literal& item : items) out.values.push_back(as_coeff(item));
  if (out.values.empty()) throw UsageError(where + ": coefficient list cannot be empty");
  return out;
}

// ---- timm's Muon functions -----------------------------------------------------

// _is_suitable_for_muon, with its reason.
std::pair<bool, std::string> suitable_for_muon(at::IntArrayRef s, int64_t min_dim_size = 4,
                                               double max_aspect_ratio = 128.) {
  const auto non_unit = std::count_if(s.begin(), s.end(), [](int64_t d) { return d > 1; });
  if (s.size() < 2 || non_unit < 2) return {false, "insufficient_dims"};
  if (s[0] == 1 || s[1] == 1) return {false, "leading_unit_dims"};
  int64_t out_ch = s[0];
  int64_t in_ch = s[1];
  if (s.size() >= 3) {
    in_ch = 1;
    for (std::size_t d = 1; d < s.size(); ++d) in_ch *= s[d];
  }
  const int64_t min_size = std::min(out_ch, in_ch);
  if (min_size < min_dim_size) return {false, "min_dim_too_small:" + std::to_string(min_size)};
  const double aspect_ratio = static_cast<double>(std::max(out_ch, in_ch)) / static_cast<double>(min_size);
  if (aspect_ratio > max_aspect_ratio) return {false, format("extreme_aspect_ratio:%.1f", aspect_ratio)};
  return {true, "ok"};
}

// reshape_for_muon: (out, in, *spatial) as (out, in * spatial) ("flatten")
// or (spatial, out, in) ("batched").
at::Tensor reshape_for_muon(const at::Tensor& tensor, bool batched) {
  const int64_t out_ch = tensor.size(0);
  const int64_t in_ch = tensor.size(1);
  if (!batched) return tensor.reshape({out_ch, -1});
  return tensor.reshape({out_ch, in_ch, -1}).permute({2, 0, 1});
}

// The dtype Newton-Schulz multiplies its bfloat16 matrices in
// (--opt-kwargs ns_matmul_dtype, a timm-cpp argument).
enum class NsMatmul {
  kAuto,      // bfloat16 on CUDA; on the CPU, whichever is_float32_matmul_faster() picks
  kBFloat16,  // timm's products: bfloat16 GEMMs, bit for bit
  kFloat32,   // float32 GEMMs of the bfloat16 values, each result rounded to bfloat16
};

double seconds_of_matmul(at::ScalarType dtype) {
  constexpr int64_t kSize = 512;
  // Not randn: the benchmark leaves the global generator as it was.
  const at::Tensor x = at::linspace(-1.0, 1.0, kSize * kSize).reshape({kSize, kSize}).to(dtype);
  at::Tensor out = at::empty_like(x);
  at::mm_out(out, x, x.t());  // warm-up: packing buffers, oneDNN primitives
  double best = 1e30;
  for (int repeat = 0; repeat < 3; ++repeat) {
    const Stopwatch watch;
    at::mm_out(out, x, x.t());
    best = std::min(best, watch.seconds());
  }
  return best;
}

// Whether this CPU multiplies float32 matrices at least 1.25x faster than
// bfloat16 ones (torch's bfloat16 GEMM without AMX: 162 against 309
// GFLOP/s on the Intel build host; on AMX or AMD hosts bfloat16 is faster).
// Timed once per process, as cudnn.benchmark picks convolution algorithms;
// the 1.25 margin keeps a near tie on timm's products.
bool is_float32_matmul_faster() {
  static const bool faster = [] {
    const double bf16 = seconds_of_matmul(at::kBFloat16);
    const double fp32 = seconds_of_matmul(at::kFloat);
    const bool pick = fp32 * 1.25 < bf16;
    log_info(
        format("Muon: Newton-Schulz products in %s on this CPU (512x512 matmul: bfloat16 %.2f ms, float32 "
               "%.2f ms; --opt-kwargs ns_matmul_dtype chooses)",
               pick ? "float32" : "bfloat16", bf16 * 1e3, fp32 * 1e3));
    return pick;
  }();
  return faster;
}

at::ScalarType ns_matmul_dtype(NsMatmul choice, const at::Tensor& G) {
  if (choice == NsMatmul::kFloat32) return at::kFloat;
  if (choice == NsMatmul::kBFloat16 || !G.is_cpu()) return at::kBFloat16;
  return is_float32_matmul_faster() ? at::kFloat : at::kBFloat16;
}

// Rounds `t` to bfloat16 values through `scratch`, a bfloat16 tensor of its
// shape: the result a bfloat16 GEMM would store.
void round_to_bfloat16(at::Tensor& t, at::Tensor& scratch) {
  scratch.copy_(t);
  t.copy_(scratch);
}

// zeropower_via_newtonschulz in bfloat16 (timm's default dtype), its
// preallocated addmm / baddbmm path. With float32 products, each product's
// inputs are bfloat16 values (exact in float32) and its result is rounded
// to bfloat16, as timm's; only the order of the float32 accumulation
// differs, so entries may differ from timm's in the last bfloat16 bit (as
// they do between timm on two CPUs), at timm's accuracy against float64.
at::Tensor zeropower_via_newtonschulz(const at::Tensor& G, int64_t steps, const std::vector<Coefficient>& coefficients,
                                      double eps, double safety_factor, bool scale_eps, NsMatmul matmul) {
  std::vector<Coefficient> sequence(coefficients.begin(),
                                    coefficients.begin() + std::min<int64_t>(steps, coefficients.size()));
  while (static_cast<int64_t>(sequence.size()) < steps) sequence.push_back(coefficients.back());
  if (scale_eps) {
    // scale_eps_for_ns: eps * (din / dout) ** 0.5
    const double dout = static_cast<double>(G.size(-2));
    const double din = static_cast<double>(G.size(-1));
    eps = eps * std::pow(din / dout, 0.5);
  }
  at::Tensor X = G.to(at::kBFloat16, /*non_blocking=*/false, /*copy=*/true);
  const bool transposed = X.size(-2) > X.size(-1);
  if (transposed) X = X.mT();
  const std::vector<int64_t> dims{-2, -1};
  at::Tensor norm = at::linalg_vector_norm(X, 2, dims, /*keepdim=*/true, std::nullopt).mul(safety_factor);
  if (scale_eps) {
    X.div_(norm.add_(eps));
  } else {
    X.div_(norm.clamp_(c10::Scalar(eps), std::nullopt));
  }
  const bool batched = X.dim() > 2;
  const bool rounds = ns_matmul_dtype(matmul, G) != at::kBFloat16;
  X = rounds ? X.to(at::kFloat).contiguous() : X.contiguous();
  std::vector<int64_t> a_shape = X.sizes().vec();
  a_shape.back() = X.size(-2);
  at::Tensor A = at::empty(a_shape, X.options());
  at::Tensor B = at::empty_like(A);
  at::Tensor C = at::empty_like(X);
  at::Tensor a_scratch;
  at::Tensor x_scratch;
  if (rounds) {
    a_scratch = at::empty_like(A, A.options().dtype(at::kBFloat16));
    x_scratch = at::empty_like(X, X.options().dtype(at::kBFloat16));
  }
  // out = beta * input + alpha * (m1 @ m2), rounded to bfloat16 when the
  // product ran in float32.
  auto gemm = [&](at::Tensor& out, const at::Tensor& input, const at::Tensor& m1, const at::Tensor& m2, double beta,
                  double alpha, at::Tensor& scratch) {
    if (batched) {
      at::baddbmm_out(out, input, m1, m2, beta, alpha);
    } else {
      at::addmm_out(out, input, m1, m2, beta, alpha);
    }
    if (rounds) round_to_bfloat16(out, scratch);
  };
  for (const auto& [a, b, c] : sequence) {
    gemm(A, A, X, X.mT(), 0.0, 1.0, a_scratch);  // A = X @ X.mT
    gemm(B, A, A, A, b, c, a_scratch);           // B = b * A + c * A @ A
    gemm(C, X, B, X, a, 1.0, x_scratch);         // C = a * X + B @ X
    std::swap(X, C);
  }
  if (rounds) X = X.to(at::kBFloat16);
  if (transposed) X = X.mT();
  return X;
}

// get_lr_scale: of the orthogonalised matrix's (out, in).
double lr_scale_for(at::IntArrayRef shape, const std::string& fn) {
  const double out_chs = static_cast<double>(shape[shape.size() - 2]);
  const double in_chs = static_cast<double>(shape[shape.size() - 1]);
  if (fn == "original") return std::pow(std::max(1.0, out_chs / in_chs), 0.5);
  if (fn == "match_rms_adamw") return 0.2 * std::pow(std::max(out_chs, in_chs), 0.5);
  return std::pow(out_chs / in_chs, 0.5);  // rms_to_rms
}

// get_adamuon_lr_scale: (scale, normalise by the update's RMS).
std::pair<double, bool> adamuon_lr_scale_for(at::IntArrayRef shape, const std::string& fn) {
  const double out_chs = static_cast<double>(shape[shape.size() - 2]);
  const double in_chs = static_cast<double>(shape[shape.size() - 1]);
  if (fn == "match_rms_adamw") {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    return {0.2 * std::pow(static_cast<double>(numel), 0.5), true};
  }
  if (fn == "rms_to_rms") return {std::pow(out_chs / in_chs, 0.5), false};
  return {std::pow(in_chs, -0.5), false};  // rsqrt_in
}

// ---- The optimizer ---------------------------------------------------------------

struct MuonConfig {
  double momentum = 0.95;
  bool nesterov = false;
  int64_t ns_steps = 5;
  std::vector<Coefficient> ns_coefficients;
  double eps = 1e-7;
  double safety_factor = 1.0;
  std::optional<std::string> adjust_lr_fn = "match_rms_adamw";  // None or '' for no scaling
  bool batched = false;                                         // conv_mode 'batched'
  bool normalize_spatial = true;
  double fallback_lr_scale = 1.0;
  double beta1 = 0.9;
  double beta2 = 0.95;
  bool adamuon = false;  // algo 'adamuon'
  bool scale_eps = false;
  bool verbose = false;
  NsMatmul ns_matmul = NsMatmul::kAuto;
};

class Muon : public ForeachOptimizer {
 public:
  Muon(std::vector<ParamGroup> groups, double lr, std::string description, MuonConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(std::move(config)) {}

  void step() override {
    muon_count_ = 0;
    adamw_count_ = 0;
    routing_reasons_.clear();
    ForeachOptimizer::step();
    if (c_.verbose && !routing_reasons_.empty()) log_routing();
  }

 private:
  bool adjusts() const { return c_.adjust_lr_fn && !c_.adjust_lr_fn->empty(); }

  void step_group(GroupStep& g) override {
    std::vector<std::size_t> muon;
    std::vector<std::size_t> fallback;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      State& state = *g.states[i];
      const at::Tensor& p = g.params[i];
      // The routing, decided at a parameter's first step and kept in its state.
      auto it = state.find("use_muon");
      if (it == state.end()) {
        const auto [suitable, reason] = suitable_for_muon(p.sizes());
        it = state.emplace("use_muon", at::scalar_tensor(suitable, at::TensorOptions().dtype(at::kBool))).first;
        if (c_.verbose) {
          std::string shape;
          for (int64_t d = 0; d < p.dim(); ++d) {
            if (d > 0) shape += 'x';
            shape += std::to_string(p.size(d));
          }
          routing_reasons_[shape].push_back(reason);
        }
      }
      if (it->second.item<bool>()) {
        muon.push_back(i);
        ++muon_count_;
        if (state.count("momentum_buffer") == 0) {
          state["momentum_buffer"] = at::zeros_like(p, at::MemoryFormat::Preserve);
        }
        if (c_.adamuon && state.count("step") == 0) {
          state["step"] = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
          state["exp_avg_sq"] = at::zeros_like(p, at::MemoryFormat::Preserve);
        }
      } else {
        fallback.push_back(i);
        ++adamw_count_;
        if (state.count("step") == 0) {
          state["step"] = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
          state["exp_avg"] = at::zeros_like(p, at::MemoryFormat::Preserve);
          state["exp_avg_sq"] = at::zeros_like(p, at::MemoryFormat::Preserve);
        }
      }
    }
    for (std::size_t i : muon) {
      if (c_.adamuon) {
        adamuon_step(g.params[i], g.grads[i], *g.states[i], g.lr, g.weight_decay);
      } else {
        muon_step(g.params[i], g.grads[i], *g.states[i], g.lr, g.weight_decay);
      }
    }
    // timm's adamw / nadamw (single tensor on the CPU) with lr * fallback_lr_scale.
    const double fallback_lr = g.lr * c_.fallback_lr_scale;
    for (std::size_t i : fallback) fallback_step(g.params[i], g.grads[i], *g.states[i], fallback_lr, g.weight_decay);
  }

  // The momentum update (Nesterov's look-ahead or the buffer), as the matrix
  // Newton-Schulz works on, orthogonalised.
  at::Tensor orthogonalised(const at::Tensor& grad, at::Tensor& momentum_buf) const {
    momentum_buf.lerp_(grad, c10::Scalar(1. - c_.momentum));
    const at::Tensor update = c_.nesterov ? grad.lerp(momentum_buf, c10::Scalar(c_.momentum)) : momentum_buf.clone();
    const at::Tensor reshaped = update.dim() >= 3 ? reshape_for_muon(update, c_.batched) : update;
    return zeropower_via_newtonschulz(reshaped, c_.ns_steps, c_.ns_coefficients, c_.eps, c_.safety_factor, c_.scale_eps,
                                      c_.ns_matmul);
  }

  // _single_tensor_muon
  void muon_step(at::Tensor& param, const at::Tensor& grad, State& state, double lr, double weight_decay) const {
    param.mul_(1 - lr * weight_decay);
    const std::vector<int64_t> original_shape = param.sizes().vec();
    at::Tensor ortho = orthogonalised(grad, state.at("momentum_buffer"));
    double scale = adjusts() ? lr_scale_for(ortho.sizes(), *c_.adjust_lr_fn) : 1.0;
    if (c_.batched && ortho.dim() >= 3) {
      if (c_.normalize_spatial) scale *= std::pow(static_cast<double>(ortho.size(0)), -0.5);
      ortho = ortho.permute({1, 2, 0});
    }
    ortho = ortho.reshape(original_shape);
    param.add_(ortho, -lr * scale);
  }

  // _single_tensor_adamuon
  void adamuon_step(at::Tensor& param, const at::Tensor& grad, State& state, double lr, double weight_decay) const {
    at::Tensor& step_t = state.at("step");
    step_t.add_(1);
    const double step = step_t.item<double>();
    param.mul_(1 - lr * weight_decay);
    const std::vector<int64_t> original_shape = param.sizes().vec();
    at::Tensor ortho = orthogonalised(grad, state.at("momentum_buffer"));
    double scale = 1.0;
    bool use_rms_norm = false;
    if (adjusts()) std::tie(scale, use_rms_norm) = adamuon_lr_scale_for(ortho.sizes(), *c_.adjust_lr_fn);
    if (c_.batched && ortho.dim() >= 3) ortho = ortho.permute({1, 2, 0});
    ortho = ortho.reshape(original_shape);

    at::Tensor& exp_avg_sq = state.at("exp_avg_sq");
    exp_avg_sq.mul_(c_.beta2).addcmul_(ortho, ortho, 1.0 - c_.beta2);
    at::Tensor denom;
    if (use_rms_norm) {
      denom = exp_avg_sq.sqrt().add_(c_.eps);
    } else {
      const double bias_correction2 = 1.0 - std::pow(c_.beta2, step);
      denom = (exp_avg_sq / bias_correction2).sqrt().add_(c_.eps);
    }
    at::Tensor update = ortho / denom;
    if (use_rms_norm) {
      const at::Tensor update_norm = at::linalg_vector_norm(update, 2, std::nullopt, false, std::nullopt).add_(c_.eps);
      update = update / update_norm;
    }
    if (c_.batched && original_shape.size() >= 3 && c_.normalize_spatial) {
      int64_t spatial_prod = 1;
      for (std::size_t d = 2; d < original_shape.size(); ++d) spatial_prod *= original_shape[d];
      scale *= std::pow(static_cast<double>(spatial_prod), -0.5);
    }
    param.add_(update, -lr * scale);
  }

  // timm's _single_tensor_adamw, or _single_tensor_nadamw with nesterov.
  void fallback_step(at::Tensor& param, const at::Tensor& grad, State& state, double lr, double weight_decay) const {
    at::Tensor& step_t = state.at("step");
    at::Tensor& exp_avg = state.at("exp_avg");
    at::Tensor& exp_avg_sq = state.at("exp_avg_sq");
    step_t.add_(1);
    param.mul_(1. - lr * weight_decay);
    exp_avg.lerp_(grad, c10::Scalar(1 - c_.beta1));
    exp_avg_sq.mul_(c_.beta2).addcmul_(grad, grad, 1 - c_.beta2);
    const double step = step_t.item<double>();
    const double bias_correction1 = 1 - std::pow(c_.beta1, step);
    const double bias_correction2 = 1 - std::pow(c_.beta2, step);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    const at::Tensor numerator = c_.nesterov ? exp_avg.lerp(grad, c10::Scalar(1 - c_.beta1)) : exp_avg;
    const at::Tensor denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(c_.eps);
    param.addcdiv_(numerator, denom, -step_size);
  }

  // timm's verbose routing summary, for the decisions of this step.
  void log_routing() const {
    log_info(format("Muon parameter routing: %lld Muon, %lld AdamW", static_cast<long long>(muon_count_),
                    static_cast<long long>(adamw_count_)));
    std::map<std::string, std::vector<std::string>> reason_groups;
    for (const auto& [shape, reasons] : routing_reasons_) {
      for (const std::string& reason : reasons) reason_groups[reason].push_back(shape);
    }
    std::string summary;
    for (const auto& [reason, shapes] : reason_groups) {
      summary += (summary.empty() ? "" : ", ") + reason + "=" + std::to_string(shapes.size());
    }
    log_info("  Breakdown: " + summary);
    for (const auto& [reason, shapes] : reason_groups) {
      log_info("    " + reason + " -> " + (reason == "ok" ? "Muon" : "AdamW") + ":");
      for (std::size_t i = 0; i < shapes.size() && i < 10; ++i) log_info("      " + shapes[i]);
      if (shapes.size() > 10) log_info("      ... and " + std::to_string(shapes.size() - 10) + " more");
    }
  }

  MuonConfig c_;
  int64_t muon_count_ = 0;
  int64_t adamw_count_ = 0;
  std::map<std::string, std::vector<std::string>> routing_reasons_;  // shape -> reasons, verbose only
};

// ns_matmul_dtype: timm-cpp's, not timm's (so not in the log line, which
// stays timm's). In a distributed job, 'auto' is timm's bfloat16: a timed
// choice could differ between ranks, whose replicas must take the same step.
NsMatmul resolve_ns_matmul(const OptimizerArgs& args) {
  const std::optional<std::string> name = string_kwarg(args, "ns_matmul_dtype", std::string("auto"));
  if (name == "auto") {
    if (!dist::world_from_env(dist::current_env()).distributed()) return NsMatmul::kAuto;
    log_info(
        "Muon: Newton-Schulz products in bfloat16 in a distributed job (the same on every rank; "
        "--opt-kwargs ns_matmul_dtype=float32 for float32 ones)");
    return NsMatmul::kBFloat16;
  }
  if (name == "bfloat16") return NsMatmul::kBFloat16;
  if (name == "float32") return NsMatmul::kFloat32;
  throw UsageError("optimizer " + in_quotes(args.opt) + ": invalid ns_matmul_dtype " +
                   (name ? in_quotes(*name) : "None") + " (expected 'auto', 'bfloat16' or 'float32')");
}

OptimizerPtr make_muon(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  const OptimizerKwargs kwargs(
      args, {"nesterov", "ns_steps", "ns_coefficients", "eps", "safety_factor", "adjust_lr_fn", "conv_mode",
             "normalize_spatial", "adamw_lr", "fallback_lr_scale", "betas", "algo", "scale_eps", "capturable",
             "verbose", "foreach", "fallback_list", "fallback_no_weight_decay", "ns_matmul_dtype"});
  const std::string opt = in_quotes(args.opt);
  // create_optimizer_v2's hybrid-optimizer grouping: timm-cpp builds timm's
  // weight-decay and layer-decay groups only, without the use_fallback flags.
  for (const char* key : {"fallback_list", "fallback_no_weight_decay"}) {
    if (kwargs.has(key)) {
      throw UsageError("--opt-kwargs " + std::string(key) + "=" + args.kwargs.at(key) +
                       ": not supported by timm-cpp yet (optimizer " + opt +
                       "; parameters take the AdamW fallback by their shape)");
    }
  }
  // create_optimizer_v2 passes foreach on to Muon, which takes no foreach.
  if (const auto foreach = string_kwarg(args, "foreach", std::nullopt)) {
    throw UsageError("--opt-kwargs foreach=" + *foreach + ": optimizer " + opt +
                     " (timm's Muon) has no foreach argument (only None)");
  }
  reject_true_kwargs(args, kwargs, {"capturable"});
  check_lr(args);
  if (args.momentum < 0 || args.momentum >= 1) {
    throw UsageError("optimizer " + opt + ": invalid momentum " + python_float_repr(args.momentum) +
                     " (expected 0 <= momentum < 1)");
  }
  MuonConfig c;
  c.momentum = args.momentum;
  c.nesterov = kwargs.get_bool("nesterov", false);

  std::string ns_steps_repr = "5";
  if (kwargs.has("ns_steps")) {
    const std::string s = trim(args.kwargs.at("ns_steps"));
    const bool integer = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    if (!integer) {
      throw UsageError("--opt-kwargs ns_steps=" + s + " (optimizer " + opt + "): expected a non-negative integer");
    }
    c.ns_steps = std::stoll(s);
    ns_steps_repr = std::to_string(c.ns_steps);
  }
  const NsCoefficients coefficients = resolve_ns_coefficients(args);
  c.ns_coefficients = coefficients.values;
  const EpsArg eps = resolve_eps(args, kwargs, 1e-7);
  c.eps = eps.value;
  c.safety_factor = kwargs.get_double("safety_factor", 1.0);

  const std::optional<std::string> algo = string_kwarg(args, "algo", std::string("muon"));
  if (!algo || (*algo != "muon" && *algo != "adamuon")) {
    throw UsageError("optimizer " + opt + ": invalid algo " + (algo ? in_quotes(*algo) : "None") +
                     " (expected 'muon' or 'adamuon')");
  }
  c.adamuon = *algo == "adamuon";

  c.adjust_lr_fn = string_kwarg(args, "adjust_lr_fn", std::string("match_rms_adamw"));
  if (c.adjust_lr_fn && !c.adjust_lr_fn->empty()) {
    // timm asserts on an unknown name at the first step; checked here.
    const std::vector<std::string> valid = c.adamuon
                                               ? std::vector<std::string>{"match_rms_adamw", "rms_to_rms", "rsqrt_in"}
                                               : std::vector<std::string>{"original", "match_rms_adamw", "rms_to_rms"};
    if (std::find(valid.begin(), valid.end(), *c.adjust_lr_fn) == valid.end()) {
      throw UsageError("optimizer " + opt + ": invalid adjust_lr_fn " + in_quotes(*c.adjust_lr_fn) + " for algo " +
                       in_quotes(*algo) + " (expected one of: " + joined_names(valid) + ", or None)");
    }
  }
  const std::optional<std::string> conv_mode = string_kwarg(args, "conv_mode", std::string("flatten"));
  if (!conv_mode || (*conv_mode != "flatten" && *conv_mode != "batched")) {
    throw UsageError("optimizer " + opt + ": invalid conv_mode " + (conv_mode ? in_quotes(*conv_mode) : "None") +
                     " (expected 'flatten' or 'batched')");
  }
  c.batched = *conv_mode == "batched";
  c.normalize_spatial = kwargs.get_bool("normalize_spatial", true);

  c.fallback_lr_scale = kwargs.get_double("fallback_lr_scale", 1.0);
  std::string fallback_lr_scale_repr = kwargs.repr("fallback_lr_scale", "1.0");
  const OptionalFloatArg adamw_lr = optional_float_kwarg(args, kwargs, "adamw_lr", std::nullopt);
  if (adamw_lr.value) {
    // timm's deprecated adamw_lr: fallback_lr_scale = adamw_lr / lr.
    if (args.lr == 0) {
      throw UsageError("optimizer " + opt + ": cannot compute fallback_lr_scale from adamw_lr when lr=0");
    }
    log_warning(
        "adamw_lr is deprecated, use fallback_lr_scale=adamw_lr/lr instead. adamw_lr will be removed in a "
        "future release.");
    c.fallback_lr_scale = *adamw_lr.value / args.lr;
    fallback_lr_scale_repr = python_float_repr(c.fallback_lr_scale);
  }
  const std::vector<double> betas = resolve_betas(args, kwargs, {0.9, 0.95});
  c.beta1 = betas[0];
  c.beta2 = betas[1];
  c.scale_eps = kwargs.get_bool("scale_eps", false);
  c.verbose = kwargs.get_bool("verbose", false);
  c.ns_matmul = resolve_ns_matmul(args);

  std::string adjust_repr = "None";
  if (c.adjust_lr_fn) adjust_repr = *c.adjust_lr_fn;
  const std::string description = describe_optimizer("Muon", args.opt,
                                                     {{"lr", python_float_repr(args.lr)},
                                                      {"weight_decay", python_float_repr(args.weight_decay)},
                                                      {"momentum", python_float_repr(args.momentum)},
                                                      {"nesterov", py_bool(c.nesterov)},
                                                      {"ns_steps", ns_steps_repr},
                                                      {"ns_coefficients", coefficients.str},
                                                      {"eps", eps.repr},
                                                      {"safety_factor", kwargs.repr("safety_factor", "1.0")},
                                                      {"adjust_lr_fn", adjust_repr},
                                                      {"conv_mode", *conv_mode},
                                                      {"normalize_spatial", py_bool(c.normalize_spatial)},
                                                      {"fallback_lr_scale", fallback_lr_scale_repr},
                                                      {"betas", betas_repr(args, betas, /*always_tuple=*/false)},
                                                      {"algo", *algo},
                                                      {"scale_eps", py_bool(c.scale_eps)},
                                                      {"capturable", "False"},
                                                      {"verbose", py_bool(c.verbose)}});
  return std::make_unique<Muon>(std::move(groups), args.lr, description, std::move(c));
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("muon") {
  using timm::bind_defaults;
  // train.py scales --lr-base by the square root of the batch ratio for names
  // with "ada" in them (adamuon, nadamuon), linearly for the others.
  const timm::OptimizerTraits sqrt_lr{.lr_base_scale = timm::LrBaseScale::kSqrt};
  registrar.add_optimizer("muon", "MomentUm Orthogonalized by Newton-schulz with AdamW fallback for 1D params",
                          timm::make_muon);
  registrar.add_optimizer("nmuon",
                          "MomentUm Orthogonalized by Newton-schulz with Nesterov and NAdamW fallback for 1D params",
                          bind_defaults(timm::make_muon, {{"nesterov", "True"}}));
  registrar.add_optimizer("adamuon",
                          "AdaMuon: Muon with adaptive second moment estimation on orthogonalized directions",
                          bind_defaults(timm::make_muon, {{"algo", "adamuon"}}), sqrt_lr);
  registrar.add_optimizer("nadamuon", "AdaMuon with Nesterov momentum and NAdamW fallback for 1D params",
                          bind_defaults(timm::make_muon, {{"algo", "adamuon"}, {"nesterov", "True"}}), sqrt_lr);
}
