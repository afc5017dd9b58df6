// "kron", "kronc", "kronw": timm.optim.Kron (timm/optim/kron.py), PSGD with a
// Kronecker-factored preconditioner: per parameter a list Q of triangular
// (or, for large, size-1 or chosen dims, diagonal) factors, updated with a
// random probe V ~ N(0, 1) at a rate set by preconditioner_update_probability
// (a float, or timm's default schedule: 1.0 for 500 steps, then annealed to
// 0.03), applied to the debiased momentum through einsum expressions built as
// timm's _init_Q_exprs. Their operands are contracted the tensor first, one
// factor at a time (contraction_path): torch.einsum without opt_einsum (timm's
// setup when it is not installed) goes left to right and forms the factors'
// outer product first, 1.4 TB for one 768x768 weight, so timm's Kron fails
// on any real model there; ours runs. The update is capped at RMS
// 1.1; L2, decoupled (kronw) or lr²/max_lr corrected decoupled (kronc) decay.
//
// Randomness as timm's: a Python random.Random(1337) (the SDK's PyRandom,
// timm/base/python_random.hpp: CPython's Mersenne Twister) for the balance draws (rng.random() < 0.01 per parameter
// and step), stochastic_weight_decay, and with deterministic=True the seed of
// each probe's generator (rng.randint(0, 2**31)); with deterministic=False
// (timm's default) the probes come from torch's default generator, whose state
// the trainer's checkpoint keeps. timm's state_dict() saves the Python rng
// state ('rng_state') and load_state_dict() restores it; save() / load() here
// do the same, and also keep Q (a list per parameter, so not in the
// per-parameter state of named tensors).
//
// Not expressible from --opt-kwargs and so refused: a callable
// preconditioner_update_probability, and mu_dtype / precond_dtype other than
// None (torch.dtype objects).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorIndexing.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "timm/base/error.hpp"
#include "timm/base/python_random.hpp"
#include "timm/log/log.hpp"
#include "timm/optim/foreach_optimizer.hpp"
#include "timm/plugin/plugin.hpp"

namespace timm {
namespace {

using Tensors = std::vector<at::Tensor>;

constexpr const char* kRngKey = "kron_rng_state";
constexpr const char* kQKey = "kron_Q";

struct KronConfig {
  double momentum = 0.9;
  std::optional<double> update_probability;  // None: timm's precond_update_prob_schedule
  double max_size_triangular = 2048;
  double min_ndim_triangular = 2;
  std::string memory_save_mode;  // empty: None
  bool momentum_into_precond_update = true;
  double precond_lr = 0.1;
  double precond_init_scale = 1.0;
  bool decoupled_decay = false;
  DecayLr decay_lr;  // lr, or lr² / max_lr (corrected_weight_decay)
  bool flatten = false;
  int64_t flatten_start_dim = 2;
  int64_t flatten_end_dim = -1;
  bool stochastic_weight_decay = false;
  bool deterministic = false;
};

// timm's _init_Q_exprs: the einsum expressions for A, the Q terms and the
// preconditioned gradient.
struct Exprs {
  std::string a;
  std::vector<std::string> gs;
  std::string p;
};

const std::string kLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

// Which dims get a diagonal factor (memory_save_mode, size, max size, ndim).
std::vector<bool> diagonal_dims(at::IntArrayRef shape, const KronConfig& c) {
  const std::size_t n = shape.size();
  std::vector<bool> diag(n, false);
  if (n == 0) return diag;  // a scalar has no factors
  // np.argsort(shape)[::-1][0]: the last of the largest dims (argsort is
  // stable for timm's few dims).
  auto largest = [&] {
    std::size_t best = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (shape[i] >= shape[best]) best = i;
    }
    return best;
  };
  if (c.memory_save_mode == "one_diag") {
    diag[largest()] = true;
  } else if (c.memory_save_mode == "smart_one_diag") {
    // sorted(shape)[-1] > sorted(shape)[-2]: the largest dim is the only one of its size.
    const std::size_t best = largest();
    bool unique = n >= 2;
    for (std::size_t i = 0; i < n; ++i) unique = unique && (i == best || shape[i] < shape[best]);
    if (unique) diag[best] = true;
  } else if (c.memory_save_mode == "all_diag") {
    std::fill(diag.begin(), diag.end(), true);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto size = static_cast<double>(shape[i]);
    if (shape[i] == 1 || size > c.max_size_triangular || static_cast<double>(n) < c.min_ndim_triangular) {
      diag[i] = true;
    }
  }
  return diag;
}

Exprs init_exprs(at::IntArrayRef shape, const KronConfig& c) {
  Exprs e;
  if (shape.empty()) {
    e.a = ",->";
    e.gs = {",->"};
    e.p = ",,->";
    return e;
  }
  const std::size_t n = shape.size();
  if (n > 13) {
    throw UsageError("optimizer Kron: got a tensor with dim " + std::to_string(n) + "; Einstein runs out of letters!");
  }
  const std::vector<bool> diag = diagonal_dims(shape, c);
  std::vector<std::string> piece1a;
  std::string piece2a, piece3a;
  std::vector<std::string> piece1p, piece2p;
  std::string piece3p, piece4p;
  auto with = [&](std::size_t i, char letter) {
    std::string s;
    for (std::size_t j = 0; j < n; ++j) s += j == i ? letter : kLetters[j];
    return s;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const char a = kLetters[i], b = kLetters[i + 13], cc = kLetters[i + 26];
    if (diag[i]) {
      piece1a.emplace_back(1, a);
      piece2a += a;
      piece3a += a;
      const std::string piece1 = with(i, b);
      e.gs.push_back(piece1 + "," + piece1 + "->" + b);
      piece1p.emplace_back(1, b);
      piece2p.emplace_back(1, b);
      piece3p += b;
      piece4p += b;
    } else {
      piece1a.push_back(std::string{a, b});
      piece2a += b;
      piece3a += a;
      e.gs.push_back(with(i, b) + "," + with(i, cc) + "->" + b + cc);
      piece1p.push_back(std::string{a, b});
      piece2p.push_back(std::string{a, cc});
      piece3p += cc;
      piece4p += b;
    }
  }
  auto join = [](const std::vector<std::string>& parts) {
    std::string s;
    for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? "," : "") + parts[i];
    return s;
  };
  e.a = join(piece1a) + "," + piece2a + "->" + piece3a;
  e.p = join(piece1p) + "," + join(piece2p) + "," + piece3p + "->" + piece4p;
  return e;
}

Tensors init_q(const at::Tensor& t, const KronConfig& c) {
  const at::TensorOptions options = t.options();
  if (t.dim() == 0) return {at::ones_like(t) * c.precond_init_scale};
  const std::vector<bool> diag = diagonal_dims(t.sizes(), c);
  const double scale = std::pow(c.precond_init_scale, 1.0 / static_cast<double>(t.dim()));
  Tensors q;
  for (int64_t i = 0; i < t.dim(); ++i) {
    const int64_t size = t.size(i);
    q.push_back(diag[static_cast<std::size_t>(i)] ? at::ones({size}, options) * scale : at::eye(size, options) * scale);
  }
  return q;
}

// timm's safe_flatten.
at::Tensor safe_flatten(const at::Tensor& t, int64_t start_dim, int64_t end_dim) {
  const int64_t ndim = t.dim();
  end_dim = std::min(end_dim >= 0 ? end_dim : ndim + end_dim, ndim - 1);
  if (ndim <= start_dim || start_dim > end_dim) return t;
  return t.flatten(start_dim, end_dim);
}

// timm's _norm_lower_bound: a cheap lower bound of the spectral norm.
at::Tensor lb(const at::Tensor& a_in, const at::Tensor& max_abs) {
  using at::indexing::Slice;
  const at::Tensor a = a_in / max_abs;
  const at::Tensor aa = at::real(a * a.conj());
  const auto [value0, i] = at::max(at::sum(aa, 0), 0);
  const auto [value1, j] = at::max(at::sum(aa, 1), 0);
  const at::Tensor ah = a.transpose(0, 1).conj();  // A.H
  if (at::gt(value0, value1).item<bool>()) {
    const at::Tensor x = at::matmul(a.index({Slice(), i}).conj(), a);
    return max_abs * at::linalg_vector_norm(at::matmul(x / at::linalg_vector_norm(x), ah));
  }
  const at::Tensor x = at::matmul(a, a.index({j}).conj());
  return max_abs * at::linalg_vector_norm(at::matmul(ah, x / at::linalg_vector_norm(x)));
}

at::Tensor norm_lower_bound(const at::Tensor& a) {
  const at::Tensor max_abs = a.norm(std::numeric_limits<double>::infinity());
  return at::where(max_abs > 0, lb(a, max_abs), max_abs);
}

// X @ inv(A), A upper triangular, in float32.
at::Tensor solve_triangular_right(const at::Tensor& x_in, const at::Tensor& a_in) {
  const at::ScalarType dtype = x_in.scalar_type();
  const at::Tensor x = x_in.to(at::kFloat);
  const at::Tensor a = a_in.to(at::kFloat);
  const at::Tensor out =
      at::linalg_solve_triangular(a, x.reshape({-1, x.size(-1)}), /*upper=*/true, /*left=*/false).reshape_as(x);
  return out.to(dtype);
}

void balance_q(Tensors& q) {
  Tensors norms_list;
  for (const at::Tensor& t : q) norms_list.push_back(t.norm(std::numeric_limits<double>::infinity()));
  at::Tensor norms = at::stack(norms_list);
  const at::Tensor geometric_mean = at::pow(norms.prod(), 1.0 / static_cast<double>(q.size()));
  norms = geometric_mean / norms;
  for (std::size_t i = 0; i < q.size(); ++i) q[i].mul_(norms[static_cast<int64_t>(i)]);
}

// at::einsum's path (opt_einsum's format: each pair of operand indices is
// contracted and the result appended last) for `groups` groups of `factors`
// operands each, then the tensor, last: the tensor meets every factor of the
// last group, then of the one before, and so on, one factor at a time. No
// intermediate is then larger than the tensor times one factor's size.
std::vector<int64_t> contraction_path(int64_t groups, int64_t factors) {
  std::vector<int64_t> path;
  for (int64_t group = groups - 1; group >= 0; --group) {
    for (int64_t k = 0; k < factors; ++k) {
      const int64_t remaining = (group + 1) * factors - k;  // operands before the running product
      path.insert(path.end(), {group * factors, remaining});
    }
  }
  return path;
}

std::pair<at::Tensor, at::Tensor> calc_a_and_conj_b(const std::string& expr_a, const at::Tensor& g, const Tensors& q,
                                                    const at::Tensor& v) {
  Tensors operands(q.begin(), q.end());
  operands.push_back(g);
  at::Tensor a = at::einsum(expr_a, operands, contraction_path(1, static_cast<int64_t>(q.size())));
  const int64_t order = g.dim();
  std::vector<int64_t> perm;
  for (int64_t d = 1; d < order; ++d) perm.push_back(d);
  if (order > 0) perm.push_back(0);
  at::Tensor conj_b = at::permute(v.conj(), perm);
  for (std::size_t i = 0; i < q.size(); ++i) {
    conj_b = q[i].dim() < 2 ? conj_b / q[i] : solve_triangular_right(conj_b, q[i]);
    if (static_cast<int64_t>(i) < order - 1) conj_b = at::transpose(conj_b, static_cast<int64_t>(i), order - 1);
  }
  return {a, conj_b};
}

// timm's precond_update_prob_schedule(n), in float32 as timm computes it.
at::Tensor schedule_probability(double n) {
  at::Tensor t = at::scalar_tensor(n, at::kFloat);
  at::Tensor prob = 1.0 * at::exp(-0.001 * (t - 500));
  prob.clamp_(0.03, 1.0);
  return prob;
}

class Kron : public ForeachOptimizer {
 public:
  Kron(std::vector<ParamGroup> groups, double lr, std::string description, KronConfig config)
      : ForeachOptimizer(std::move(groups), lr, std::move(description)), c_(std::move(config)), rng_(1337) {
    q_.resize(num_groups());
    exprs_.resize(num_groups());
    index_.resize(num_groups());
    for (std::size_t g = 0; g < num_groups(); ++g) {
      const ParamGroup& spec = param_group(g);
      q_[g].resize(spec.params.size());
      exprs_[g].resize(spec.params.size());
      for (std::size_t j = 0; j < spec.params.size(); ++j) index_[g][spec.params[j].unsafeGetTensorImpl()] = j;
    }
  }

  void step() override {
    total_momentum_size_ = 0;
    total_momentum_mb_ = 0;
    total_precond_size_ = 0;
    total_precond_mb_ = 0;
    ForeachOptimizer::step();
    if (total_momentum_size_ > 0) {
      log_info(format("PSGD Momentum buffer size: %lld elements, %.2f MB", static_cast<long long>(total_momentum_size_),
                      total_momentum_mb_));
      log_info(format("PSGD Preconditioners size: %lld elements, %.2f MB", static_cast<long long>(total_precond_size_),
                      total_precond_mb_));
    }
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    ForeachOptimizer::save(archive);
    archive.write(kRngKey, at::tensor(rng_.state(), at::kLong), /*is_buffer=*/true);
    // Q of every parameter that has a state, "<group>_<param>_<dim>"; none
    // before the first step (as the per-parameter states).
    torch::serialize::OutputArchive qs;
    bool any = false;
    for (std::size_t g = 0; g < q_.size(); ++g) {
      for (std::size_t j = 0; j < q_[g].size(); ++j) {
        for (std::size_t i = 0; i < q_[g][j].size(); ++i) {
          qs.write(std::to_string(g) + "_" + std::to_string(j) + "_" + std::to_string(i), q_[g][j][i].detach().cpu());
          any = true;
        }
      }
    }
    if (any) archive.write(kQKey, qs);
  }

  void load(torch::serialize::InputArchive& archive) override {
    ForeachOptimizer::load(archive);
    at::Tensor rng_state;
    if (archive.try_read(kRngKey, rng_state, /*is_buffer=*/true)) {
      const at::Tensor words = rng_state.to(at::kLong).contiguous();
      try {
        rng_.set_state(std::vector<int64_t>(words.data_ptr<int64_t>(), words.data_ptr<int64_t>() + words.numel()));
      } catch (const std::invalid_argument& e) {
        throw Error(std::string("cannot load Kron optimizer state: ") + kRngKey + " is no Python random state (" +
                    e.what() + ")");
      }
    } else {
      rng_ = PyRandom(1337);
    }
    torch::serialize::InputArchive qs;
    const bool has_q = archive.try_read(kQKey, qs);
    for (std::size_t g = 0; g < q_.size(); ++g) {
      for (std::size_t j = 0; j < q_[g].size(); ++j) {
        q_[g][j].clear();
        exprs_[g][j].reset();
        if (state(g, j).empty()) continue;
        if (!has_q)
          throw Error("cannot load Kron optimizer state: it holds no preconditioners ('" + std::string(kQKey) + "')");
        const at::Tensor& param = param_group(g).params[j];
        const at::Tensor shaped = c_.flatten ? safe_flatten(param, c_.flatten_start_dim, c_.flatten_end_dim) : param;
        const int64_t count = std::max<int64_t>(shaped.dim(), 1);
        for (int64_t i = 0; i < count; ++i) {
          at::Tensor value;
          const std::string key = std::to_string(g) + "_" + std::to_string(j) + "_" + std::to_string(i);
          if (!qs.try_read(key, value)) {
            throw Error("cannot load Kron optimizer state: no preconditioner " + std::to_string(i) + " of parameter " +
                        std::to_string(j) + " of group " + std::to_string(g));
          }
          q_[g][j].push_back(value.to(param.device()));
        }
      }
    }
  }

 private:
  void step_group(GroupStep& g) override {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      step_param(g, g.params[i], g.grads[i], *g.states[i], index_[g.index].at(g.params[i].unsafeGetTensorImpl()));
    }
  }

  void step_param(const GroupStep& g, at::Tensor& p, at::Tensor grad, State& state, std::size_t j) {
    bool flattened = false;
    if (c_.flatten) {
      grad = safe_flatten(grad, c_.flatten_start_dim, c_.flatten_end_dim);
      flattened = true;
    }
    Tensors& q = q_[g.index][j];
    std::optional<Exprs>& exprs = exprs_[g.index][j];
    if (state.empty()) {
      state["step"] = at::zeros({}, at::kDouble);
      state["update_counter"] = at::zeros({}, at::kDouble);
      // Kept in the parameter's shape (the checkpoint loader checks it); used
      // through a view shaped as the (flattened) gradient.
      state["momentum_buffer"] = at::zeros_like(p, at::MemoryFormat::Contiguous);
      q = init_q(grad, c_);
      exprs = init_exprs(grad.sizes(), c_);
      const at::Tensor& m = state["momentum_buffer"];
      total_momentum_size_ += m.numel();
      total_momentum_mb_ += static_cast<double>(m.numel() * m.element_size()) / (1 << 20);
      int64_t precond_size = 0;
      int64_t precond_bytes = 0;
      for (const at::Tensor& t : q) {
        precond_size += t.numel();
        precond_bytes += t.numel() * t.element_size();
      }
      total_precond_size_ += precond_size;
      total_precond_mb_ += static_cast<double>(precond_bytes) / (1 << 20);
    } else if (!exprs) {
      exprs = init_exprs(grad.sizes(), c_);
    }

    const double step_before = state.at("step").item<double>();
    double counter = state.at("update_counter").item<double>() + 1;
    bool do_update = false;
    if (c_.update_probability) {
      do_update = counter >= 1.0 / *c_.update_probability;
    } else {
      // timm: update_counter >= 1 / prob with prob a float32 tensor:
      // reciprocal(prob) * 1 <= counter, in float32.
      const at::Tensor threshold = at::reciprocal(schedule_probability(step_before)) * 1;
      do_update = at::le(threshold, counter).item<bool>();
    }
    if (do_update) counter = 0;
    state["update_counter"].fill_(counter);
    const double step = step_before + 1;
    state["step"].fill_(step);

    const double beta = c_.momentum;
    const double bias_correction = 1 - std::pow(beta, step);
    at::Tensor momentum_buffer = state["momentum_buffer"].view(grad.sizes());
    momentum_buffer.mul_(beta).add_(grad, 1 - beta);
    const at::Tensor debiased_momentum = momentum_buffer / bias_correction;

    const bool balance = rng_.random() < 0.01 && do_update;
    if (grad.dim() > 1 && balance) balance_q(q);

    if (do_update) {
      std::optional<at::Generator> generator;
      if (c_.deterministic) generator = make_generator(debiased_momentum.device(), rng_.randint(0, int64_t{1} << 31));
      const at::Tensor v = at::randn(debiased_momentum.sizes(), generator, debiased_momentum.options());
      const at::Tensor gg = c_.momentum_into_precond_update ? debiased_momentum : grad.to(debiased_momentum.dtype());
      const auto [a, conj_b] = calc_a_and_conj_b(exprs->a, gg, q, v);
      std::vector<std::pair<at::Tensor, at::Tensor>> terms;
      for (const std::string& expr_g : exprs->gs) {
        terms.emplace_back(at::einsum(expr_g, {a, a.conj()}), at::einsum(expr_g, {conj_b.conj(), conj_b}));
      }
      const double tiny = std::numeric_limits<float>::min();  // torch.finfo(torch.bfloat16).tiny
      for (std::size_t i = 0; i < q.size(); ++i) {
        const at::Tensor& term1 = terms[i].first;
        const at::Tensor& term2 = terms[i].second;
        at::Tensor tmp = term1 - term2;
        tmp.mul_(c_.precond_lr);
        if (q[i].dim() < 2) {
          tmp.mul_(q[i]);
          tmp.div_((term1 + term2).norm(std::numeric_limits<double>::infinity()) + tiny);
        } else {
          tmp = at::triu(tmp);
          tmp.div_(norm_lower_bound(term1 + term2) + tiny);
          tmp = at::matmul(tmp, q[i]);
        }
        q[i].sub_(tmp);
      }
    }

    Tensors operands;
    for (const at::Tensor& t : q) operands.push_back(t.conj());
    operands.insert(operands.end(), q.begin(), q.end());
    operands.push_back(debiased_momentum);
    at::Tensor pre_grad =
        at::einsum(exprs->p, operands, contraction_path(2, static_cast<int64_t>(q.size()))).to(p.scalar_type());
    pre_grad.mul_(at::clamp_max(at::reciprocal(pre_grad.square().mean().sqrt_() + 1e-8) * 1.1, 1.0));
    if (flattened) pre_grad = pre_grad.view(p.sizes());

    double weight_decay = g.weight_decay;
    if (weight_decay != 0) {
      if (c_.stochastic_weight_decay) weight_decay = 2 * rng_.random() * weight_decay;
      if (c_.decoupled_decay) {
        const double wd_scale = c_.decay_lr(g.lr);
        p.mul_(1. - wd_scale * weight_decay);
      } else {
        pre_grad.add_(p, weight_decay);
      }
    }
    p.add_(pre_grad, -g.lr);
  }

  // torch.Generator(device).manual_seed(seed).
  static at::Generator make_generator(const at::Device& device, int64_t seed) {
    if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
    at::Generator gen = at::globalContext().defaultGenerator(device).clone();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(static_cast<uint64_t>(seed));
    return gen;
  }

  KronConfig c_;
  PyRandom rng_;
  std::vector<std::vector<Tensors>> q_;                   // [group][param]: Q
  std::vector<std::vector<std::optional<Exprs>>> exprs_;  // cached expressions
  std::vector<std::unordered_map<const c10::TensorImpl*, std::size_t>> index_;
  int64_t total_momentum_size_ = 0;
  double total_momentum_mb_ = 0;
  int64_t total_precond_size_ = 0;
  double total_precond_mb_ = 0;
};

std::string strip_quotes(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return s;
}

// An int argument (flatten_start_dim, ...): an integer literal, as torch's
// flatten() takes no float.
int64_t integer_kwarg(const OptimizerArgs& args, const OptimizerKwargs& kwargs, const std::string& key,
                      int64_t fallback) {
  if (!kwargs.has(key)) return fallback;
  kwargs.get_double(key, 0.0);  // UsageError unless a number
  const std::string repr = kwargs.repr(key, "");
  if (repr.empty() || repr.find_first_not_of("-0123456789") != std::string::npos) {
    throw UsageError("--opt-kwargs " + key + "=" + args.kwargs.at(key) + " (optimizer " + in_quotes(args.opt) +
                     "): expected an integer");
  }
  return std::stoll(repr);
}

OptimizerPtr make_kron(std::vector<ParamGroup> groups, const OptimizerArgs& args) {
  // timm drops eps and betas (has_eps, has_betas False); --momentum is passed.
  const OptimizerKwargs kwargs(
      args, {"eps", "betas", "preconditioner_update_probability", "max_size_triangular", "min_ndim_triangular",
             "memory_save_mode", "momentum_into_precond_update", "precond_lr", "precond_init_scale", "mu_dtype",
             "precond_dtype", "decoupled_decay", "corrected_weight_decay", "flatten", "flatten_start_dim",
             "flatten_end_dim", "stochastic_weight_decay", "deterministic"});
  check_lr(args);
  const std::string who = "optimizer " + in_quotes(args.opt);
  if (!(args.momentum >= 0.0 && args.momentum < 1.0)) {
    throw UsageError(who + ": invalid momentum " + python_float_repr(args.momentum) + " (expected 0 <= momentum < 1)");
  }
  // timm's check of weight_decay >= 0 sees 0: create_optimizer_v2 puts the decay in the groups.
  for (const char* key : {"mu_dtype", "precond_dtype"}) {
    if (kwargs.has(key) && strip_quotes(args.kwargs.at(key)) != "None") {
      throw UsageError("--opt-kwargs " + std::string(key) + "=" + args.kwargs.at(key) + " (" + who +
                       "): only None is supported (timm takes a torch.dtype here, which --opt-kwargs cannot express)");
    }
  }
  KronConfig c;
  c.momentum = args.momentum;
  const OptionalFloatArg prob = optional_float_kwarg(args, kwargs, "preconditioner_update_probability", std::nullopt);
  if (prob.value && !(*prob.value > 0.0)) {
    throw UsageError(
        "--opt-kwargs preconditioner_update_probability=" + args.kwargs.at("preconditioner_update_probability") + " (" +
        who + "): expected a probability > 0 or None (timm's schedule; a callable cannot be given here)");
  }
  c.update_probability = prob.value;
  c.max_size_triangular = kwargs.get_double("max_size_triangular", 2048);
  c.min_ndim_triangular = kwargs.get_double("min_ndim_triangular", 2);
  std::string mode_repr = "None";
  if (kwargs.has("memory_save_mode") && strip_quotes(args.kwargs.at("memory_save_mode")) != "None") {
    c.memory_save_mode = strip_quotes(args.kwargs.at("memory_save_mode"));
    if (c.memory_save_mode != "one_diag" && c.memory_save_mode != "smart_one_diag" &&
        c.memory_save_mode != "all_diag") {
      throw UsageError("--opt-kwargs memory_save_mode=" + args.kwargs.at("memory_save_mode") + " (" + who +
                       "): invalid memory_save_mode, must be one of [None, 'one_diag', 'smart_one_diag', 'all_diag']");
    }
    mode_repr = c.memory_save_mode;  // the oracle's log line prints str(), not repr()
  }
  c.momentum_into_precond_update = kwargs.get_bool("momentum_into_precond_update", true);
  c.precond_lr = kwargs.get_double("precond_lr", 0.1);
  c.precond_init_scale = kwargs.get_double("precond_init_scale", 1.0);
  c.decoupled_decay = kwargs.get_bool("decoupled_decay", false);
  const DecayLr decay_lr(args, kwargs);
  c.decay_lr = decay_lr;
  c.flatten = kwargs.get_bool("flatten", false);
  c.flatten_start_dim = integer_kwarg(args, kwargs, "flatten_start_dim", 2);
  c.flatten_end_dim = integer_kwarg(args, kwargs, "flatten_end_dim", -1);
  c.stochastic_weight_decay = kwargs.get_bool("stochastic_weight_decay", false);
  c.deterministic = kwargs.get_bool("deterministic", false);
  for (const ParamGroup& group : groups) {
    for (const at::Tensor& p : group.params) {
      const at::Tensor shaped = c.flatten ? safe_flatten(p, c.flatten_start_dim, c.flatten_end_dim) : p;
      if (shaped.dim() > 13) {
        throw UsageError(who + ": got a tensor with dim " + std::to_string(shaped.dim()) +
                         "; Einstein runs out of letters! (Kron takes at most 13 dims)");
      }
    }
  }
  const std::string description =
      describe_optimizer("Kron", args.opt,
                         {{"lr", python_float_repr(args.lr)},
                          {"momentum", python_float_repr(args.momentum)},
                          {"weight_decay", python_float_repr(args.weight_decay)},
                          {"preconditioner_update_probability", prob.repr},
                          {"max_size_triangular", kwargs.repr("max_size_triangular", "2048")},
                          {"min_ndim_triangular", kwargs.repr("min_ndim_triangular", "2")},
                          {"memory_save_mode", mode_repr},
                          {"momentum_into_precond_update", py_bool(c.momentum_into_precond_update)},
                          {"precond_lr", kwargs.repr("precond_lr", "0.1")},
                          {"precond_init_scale", kwargs.repr("precond_init_scale", "1.0")},
                          {"mu_dtype", "None"},
                          {"precond_dtype", "None"},
                          {"decoupled_decay", py_bool(c.decoupled_decay)},
                          {"corrected_weight_decay", py_bool(decay_lr.corrected())},
                          {"max_lr_snapshot", python_float_repr(args.lr)},
                          {"flatten", py_bool(c.flatten)},
                          {"flatten_start_dim", std::to_string(c.flatten_start_dim)},
                          {"flatten_end_dim", std::to_string(c.flatten_end_dim)},
                          {"stochastic_weight_decay", py_bool(c.stochastic_weight_decay)}});
  return std::make_unique<Kron>(std::move(groups), args.lr, description, c);
}

}  // namespace
}  // namespace timm

TIMM_PLUGIN("kron") {
  using timm::bind_defaults;
  registrar.add_optimizer("kron", "PSGD optimizer with Kronecker-factored preconditioner", timm::make_kron);
  registrar.add_optimizer(
      "kronc", "PSGD Kron with corrected decoupled weight decay (lr²/max_lr scaling)",
      bind_defaults(timm::make_kron, {{"decoupled_decay", "True"}, {"corrected_weight_decay", "True"}}));
  registrar.add_optimizer("kronw", "PSGD optimizer with Kronecker-factored preconditioner and decoupled weight decay",
                          bind_defaults(timm::make_kron, {{"decoupled_decay", "True"}}));
}
