// Parity checks of a model plugin against Python timm, shared by the model
// plugin tests (the oracle side is tests/oracle/model_parity.py). Header-only.
//
// Float comparisons: same shape and |ours - timm| <= atol + rtol * |timm|
// (false on NaN), each test states its tolerance. Parity cases run on one
// thread, as the oracle does: train-mode gradients through BatchNorm over few
// values per channel are ill-conditioned and depend on the summation order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/layers/drop_path.hpp"
#include "timm/models/features.hpp"
#include "timm/models/model.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/train/amp.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace timm::test {

inline constexpr int64_t kParityNumClasses = 10;
// The generator seed both sides set before the train-mode step
// (model_parity.py's TRAIN_SEED).
inline constexpr uint64_t kTrainSeed = 7;

// One model configuration compared with timm (see model_parity.py).
struct ParityCase {
  std::string id;
  std::string name;
  int64_t in_chans = 3;
  int64_t img_size = 224;  // the input's width, and its height unless img_height is set
  int64_t batch = 2;
  nlohmann::json kwargs = nlohmann::json::object();  // timm.create_model kwargs
  int64_t img_height = 0;                            // 0: img_size (a square input)

  int64_t height() const { return img_height > 0 ? img_height : img_size; }
};

struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-4;
};

// A model family's drop_prob per block (0 where a block has none), in block order.
using BlockRates = std::function<std::vector<double>(torch::nn::Module&)>;

// What a family's parity checks need besides its cases.
struct ParityOptions {
  Tolerance tol = {};
  BlockRates block_rates = {};
  // Relative tolerance (doctest epsilon) of the drop-path rates: 1e-12 where
  // both sides compute in double, looser where timm's come from a float32 linspace.
  double rates_epsilon = 1e-12;
  // Buffers (BatchNorm running statistics) compared after the train step.
  std::vector<std::string> after_buffers = {};
  // The fewest gradients the oracle must have written.
  size_t min_grad_keys = 1;
  // Whether the model takes drop_path_rate (timm's VGG raises TypeError on
  // it): without, the rates are compared at the model's defaults.
  bool takes_drop_path = true;
  // The bfloat16 eval logits' tolerance (check_bf16_eval); looser where the
  // model's own bfloat16 error is large (measure timm's float32 against its
  // bfloat16 on the case and say so).
  Tolerance bf16_tol = {5e-2, 5e-2};
  // Whether the model has blocks timm's reparameterize_model folds (RepVGG,
  // MobileOne, ...): then the folded model is compared too
  // (check_reparameterized).
  bool reparam = false;
};

inline nlohmann::json cases_json(const std::vector<ParityCase>& cases, const ParityOptions& opts = {}) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    out.push_back({{"id", c.id},
                   {"name", c.name},
                   {"in_chans", c.in_chans},
                   {"img_size", c.img_size},
                   {"img_height", c.height()},
                   {"batch", c.batch},
                   {"kwargs", c.kwargs},
                   {"after_buffers", opts.after_buffers},
                   {"reparam", opts.reparam}});
  }
  return out;
}

// The ModelArgs timm.create_model gets for a case: global_pool as such, other
// kwargs through --model-kwargs text (booleans as true/false).
inline ModelArgs parity_args(const ParityCase& c) {
  ModelArgs args;
  args.num_classes = kParityNumClasses;
  args.in_chans = c.in_chans;
  for (const auto& [key, value] : c.kwargs.items()) {
    if (key == "global_pool") {
      args.global_pool = value.get<std::string>();
    } else if (value.is_boolean()) {
      args.kwargs[key] = value.get<bool>() ? "true" : "false";
    } else if (value.is_string()) {
      args.kwargs[key] = value.get<std::string>();
    } else {
      args.kwargs[key] = value.dump();
    }
  }
  return args;
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Same shape (allclose alone would broadcast) and close; false on NaN.
inline bool all_close(const at::Tensor& ours, const at::Tensor& expected, const Tolerance& tol) {
  return ours.sizes() == expected.sizes() &&
         at::allclose(ours.to(at::kDouble), expected.to(at::kDouble), tol.rtol, tol.atol);
}

// A registered model with `in_chans` input channels and `num_classes` classes.
inline ModelPtr make_model(const std::string& name, int64_t in_chans = 3, int64_t num_classes = kParityNumClasses) {
  load_builtin_plugins();
  ModelArgs args;
  args.num_classes = num_classes;
  args.in_chans = in_chans;
  return create_model(name, args);
}

// The drop_prob of `block`'s DropPath child named `child`, 0 where it has none.
inline double drop_prob(const torch::nn::Module& block, const std::string& child) {
  for (const auto& item : block.named_children()) {
    if (item.key() == child) return item.value()->as<layers::DropPath>()->options.drop_prob();
  }
  return 0.0;
}

// The drop_path1 rate of each of the model's `blocks` (a ViT's), 0 where a
// block has none.
inline std::vector<double> blocks_drop_path1_rates(torch::nn::Module& model) {
  std::vector<double> rates;
  for (const auto& block : model.named_children()["blocks"]->children())
    rates.push_back(drop_prob(*block, "drop_path1"));
  return rates;
}

// Our drop-path rates at drop_path_rate 0.2 against timm's.
inline void check_drop_path_rates(torch::nn::Module& model, const std::vector<double>& timm_rates,
                                  const ParityOptions& opts) {
  const auto our_rates = opts.block_rates(model);
  REQUIRE(our_rates.size() == timm_rates.size());
  for (size_t i = 0; i < our_rates.size(); ++i) {
    CHECK(our_rates[i] == doctest::Approx(timm_rates[i]).epsilon(opts.rates_epsilon));
  }
}

// The largest differences seen, for the test's report.
struct ParityDiffs {
  double eval = 0.0;
  double train = 0.0;
  double grad = 0.0;           // max over the compared gradients
  double features = 0.0;       // max over forward_features, forward_head and its pre_logits output
  double intermediates = 0.0;  // max over forward_intermediates' outputs
  double bf16 = 0.0;           // eval logits in bfloat16 (--model-dtype)
  double reparam = 0.0;        // max over the folded model's weights and eval logits
};

// timm's forward_features / forward_head split, eval mode, no grad, on timm's
// weights and input (`expected` from the oracle's generate): our
// forward_features(input) against timm's ("features_eval"), forward_head of
// those features against timm's forward_head ("head_eval") and with
// pre_logits against timm's pre-logits features ("pre_logits_eval"), each
// within `tol`; and our forward(input) equal bit for bit to
// forward_head(forward_features(input)), as timm's forward is. Returns the
// largest difference from timm.
inline double check_features_and_head(ClassifierImpl& model, const ParityCase& c,
                                      const std::map<std::string, at::Tensor>& expected, const Tolerance& tol) {
  const bool was_training = model.is_training();
  model.eval();
  c10::NoGradGuard no_grad;
  const at::Tensor& input = expected.at("input");
  const at::Tensor features = model.forward_features(input);
  const at::Tensor head = model.forward_head(features);
  const at::Tensor pre_logits = model.forward_head(features, /*pre_logits=*/true);
  double worst = 0.0;
  for (const auto& [key, ours] : {std::pair<std::string, at::Tensor>{"features_eval", features},
                                  std::pair<std::string, at::Tensor>{"head_eval", head},
                                  std::pair<std::string, at::Tensor>{"pre_logits_eval", pre_logits}}) {
    const at::Tensor& timm_value = expected.at(key);
    CHECK_MESSAGE((ours.sizes() == timm_value.sizes()),
                  c.id << " " << key << ": shape " << ours.sizes() << ", timm " << timm_value.sizes());
    if (ours.sizes() != timm_value.sizes()) continue;
    const double d = max_abs_diff(ours, timm_value);
    worst = worst_diff(worst, d);
    CHECK_MESSAGE(all_close(ours, timm_value, tol), c.id << " " << key << " max abs diff " << d);
  }
  CHECK_MESSAGE(at::equal(model.forward(input), head), c.id << ": forward != forward_head(forward_features(x))");
  model.train(was_training);
  return worst;
}

// One forward_intermediates call the parity cases compare with timm's
// (model_parity.py's INTERMEDIATES_VARIANTS has the same ids and arguments).
struct IntermediatesVariant {
  std::string id;
  IntermediatesOptions options;
};

inline std::vector<IntermediatesVariant> intermediates_variants() {
  return {
      {"all", IntermediatesOptions()},
      {"last2_early_only", IntermediatesOptions().indices(int64_t{2}).stop_early(true).intermediates_only(true)},
      {"ends_norm", IntermediatesOptions().indices(std::vector<int64_t>{0, -1}).norm(true)},
      {"second_early", IntermediatesOptions().indices(std::vector<int64_t>{1}).stop_early(true)},
      {"nlc", IntermediatesOptions().output_fmt("NLC")},
  };
}

inline nlohmann::json feature_info_json(const std::vector<FeatureInfo>& info) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : info) out.push_back({f.num_chs, f.reduction, f.module});
  return out;
}

// feature_info equal to timm's, and forward_intermediates (eval, no grad, on
// timm's weights and input) for each variant: the same number of
// intermediates, each within `tol` of timm's, final features when timm has
// them, within `tol` too; a UsageError where timm refuses the arguments. The
// "all" variant's final features are forward_features(input) bit for bit.
// Returns the largest difference from timm.
inline double check_intermediates(ClassifierImpl& model, const ParityCase& c,
                                  const std::map<std::string, at::Tensor>& expected,
                                  const std::map<std::string, std::string>& meta, const Tolerance& tol) {
  CHECK(feature_info_json(model.feature_info()) == nlohmann::json::parse(meta.at("feature_info")));
  const bool was_training = model.is_training();
  model.eval();
  c10::NoGradGuard no_grad;
  const at::Tensor& input = expected.at("input");
  const auto timm_results = nlohmann::json::parse(meta.at("intermediates"));
  double worst = 0.0;
  auto compare = [&](const std::string& key, const at::Tensor& ours) {
    const at::Tensor& timm_value = expected.at(key);
    CHECK_MESSAGE((ours.sizes() == timm_value.sizes()),
                  c.id << " " << key << ": shape " << ours.sizes() << ", timm " << timm_value.sizes());
    if (ours.sizes() != timm_value.sizes()) return;
    const double d = max_abs_diff(ours, timm_value);
    worst = worst_diff(worst, d);
    CHECK_MESSAGE(all_close(ours, timm_value, tol), c.id << " " << key << " max abs diff " << d);
  };
  for (const auto& variant : intermediates_variants()) {
    CAPTURE(variant.id);
    const auto& timm_result = timm_results.at(variant.id);
    if (timm_result.contains("error")) {
      CHECK_THROWS_AS(model.forward_intermediates(input, variant.options), UsageError);
      continue;
    }
    const Intermediates ours = model.forward_intermediates(input, variant.options);
    REQUIRE(ours.intermediates.size() == timm_result.at("count").get<size_t>());
    for (size_t i = 0; i < ours.intermediates.size(); ++i) {
      compare("inter." + variant.id + "." + std::to_string(i), ours.intermediates[i]);
    }
    REQUIRE(ours.final.defined() == timm_result.at("final").get<bool>());
    if (ours.final.defined()) compare("inter." + variant.id + ".final", ours.final);
    if (variant.id == "all") CHECK(at::equal(ours.final, model.forward_features(input)));
  }
  model.train(was_training);
  return worst;
}

// --model-dtype bfloat16: timm's weights converted as Python's
// model.to(torch.bfloat16) (to_model_dtype) give, on the input in bfloat16,
// eval logits within `tol` (ParityOptions::bf16_tol) of timm's bfloat16
// model's. Both run bfloat16 kernels, so the differences are roundings where
// an op is decomposed differently. Returns the largest difference.
inline double check_bf16_eval(const ParityCase& c, const NamedTensors& timm_state, const Tolerance& tol,
                              const std::map<std::string, at::Tensor>& expected) {
  ModelPtr model = create_model(c.name, parity_args(c));
  load_state_dict(*model, timm_state, /*strict=*/true);
  to_model_dtype(*model, at::kBFloat16);
  model->eval();
  c10::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(expected.at("input").to(at::kBFloat16));
  CHECK((logits.scalar_type() == at::kBFloat16));
  const at::Tensor& timm_logits = expected.at("logits_eval_bf16");
  const double d = max_abs_diff(logits, timm_logits);
  CHECK_MESSAGE(
      all_close(logits.to(at::kFloat), timm_logits, tol),
      c.id << " bfloat16 eval max abs diff " << d << " (max |logit| " << timm_logits.abs().max().item<double>() << ")");
  return d;
}

// timm's reparameterize_model on timm's weights (ParityOptions::reparam):
// ours folds at least one block, and nothing more when asked again; the
// folded state_dict has timm's folded keys in timm's order and values within
// `tol` ("reparam.model.<key>"), and its eval logits equal timm's folded
// model's ("reparam.logits_eval").
inline double check_reparameterized(const ParityCase& c, const NamedTensors& timm_state,
                                    const std::map<std::string, at::Tensor>& expected,
                                    const std::map<std::string, std::string>& meta, const Tolerance& tol) {
  ModelPtr model = create_model(c.name, parity_args(c));
  load_state_dict(*model, timm_state, /*strict=*/true);
  model->eval();
  CHECK_MESSAGE(model->reparameterize() > 0, c.id << ": reparameterize() folded nothing");
  CHECK_MESSAGE(model->reparameterize() == 0, c.id << ": a second reparameterize() folded again");
  const NamedTensors folded = state_dict(*model);
  std::vector<std::string> keys;
  double worst = 0.0;
  for (const auto& [key, tensor] : folded) {
    keys.push_back(key);
    const auto it = expected.find("reparam.model." + key);
    REQUIRE_MESSAGE(it != expected.end(), c.id << ": folded key " << key << " is not in timm's folded model");
    const double d = max_abs_diff(tensor, it->second);
    worst = worst_diff(worst, d);
    CHECK_MESSAGE(all_close(tensor, it->second, tol), c.id << " folded " << key << " max abs diff " << d);
  }
  CHECK(keys == nlohmann::json::parse(meta.at("reparam_state_dict_keys")).get<std::vector<std::string>>());
  c10::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(expected.at("input"));
  const double d = max_abs_diff(logits, expected.at("reparam.logits_eval"));
  CHECK_MESSAGE(all_close(logits, expected.at("reparam.logits_eval"), tol), c.id << " folded eval max abs diff " << d);
  return worst_diff(worst, d);
}

// forward_head's num_classes 0 and pre_logits on our side alone (eval, no
// grad, random weights): a model without a classifier, given the weights of
// one with kParityNumClasses (its head keys left out), returns from
// forward_head the same with and without pre_logits, equal to the classifier
// model's forward_head(features, pre_logits=true) and to its own forward;
// the classifier model's forward_head is its forward. `kwargs` as a case's.
inline void check_head_split(const std::string& name, int64_t img_size, const nlohmann::json& kwargs = {}) {
  CAPTURE(name);
  load_builtin_plugins();
  ParityCase c{name, name, 3, img_size, 2, kwargs.is_null() ? nlohmann::json::object() : kwargs};
  at::manual_seed(0);
  ModelPtr with_fc = create_model(name, parity_args(c));
  ModelArgs no_fc_args = parity_args(c);
  no_fc_args.num_classes = 0;
  ModelPtr no_fc = create_model(name, no_fc_args);
  const auto loaded = load_state_dict(*no_fc, state_dict(*with_fc), /*strict=*/false);
  CHECK(loaded.missing_keys.empty());
  CHECK(!loaded.unexpected_keys.empty());  // the classifier's weights
  with_fc->eval();
  no_fc->eval();
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({c.batch, c.in_chans, img_size, img_size});
  const at::Tensor features = with_fc->forward_features(x);
  CHECK(at::equal(no_fc->forward_features(x), features));
  const at::Tensor pre_logits = with_fc->forward_head(features, /*pre_logits=*/true);
  CHECK(pre_logits.dim() == 2);
  CHECK(pre_logits.size(0) == c.batch);
  const at::Tensor logits = with_fc->forward_head(features);
  CHECK((logits.sizes() == at::IntArrayRef{c.batch, kParityNumClasses}));
  CHECK(at::equal(with_fc->forward(x), logits));
  const at::Tensor pooled = no_fc->forward_head(features);
  CHECK(at::equal(pooled, pre_logits));
  CHECK(at::equal(no_fc->forward_head(features, /*pre_logits=*/true), pooled));
  CHECK(at::equal(no_fc->forward(x), pooled));
}

// drop_rate 1 zeroes the head's input in training, so the logits of `x` are
// the classifier bias `bias_key` (drawn from N(0, 1) first, so that a head
// giving zeros cannot pass); in eval they are not. `args` without drop_rate.
inline void check_head_dropout_gives_bias(const std::string& name, ModelArgs args, const std::string& bias_key,
                                          const at::Tensor& x) {
  CAPTURE(name);
  load_builtin_plugins();
  c10::NoGradGuard no_grad;
  args.drop_rate = 1.0;
  ModelPtr dropped = create_model(name, args);
  dropped->named_parameters()[bias_key].normal_();
  const at::Tensor bias = dropped->named_parameters()[bias_key].expand({x.size(0), args.num_classes});
  dropped->train();
  CHECK(at::allclose(dropped->forward(x), bias));
  dropped->eval();
  CHECK_FALSE(at::allclose(dropped->forward(x), bias));
}

// Structure (state_dict keys in order, shapes, dtypes, parameter count), then
// timm's weights give timm's eval logits, eval forward_features /
// forward_head / pre-logits (check_features_and_head), feature_info and
// forward_intermediates (check_intermediates), bfloat16 eval logits
// (check_bf16_eval), train logits, loss,
// gradients and `after_buffers` here, and the per-block drop-path rates for
// drop_path_rate 0.2 equal timm's.
inline ParityDiffs check_timm_to_cpp(const ParityCase& c, const SafetensorsFile& file, const ParityOptions& opts) {
  const Tolerance& tol = opts.tol;
  std::map<std::string, at::Tensor> expected(file.tensors.begin(), file.tensors.end());
  const auto& meta = file.metadata;
  load_builtin_plugins();
  ModelPtr model = create_model(c.name, parity_args(c));

  const NamedTensors ours = state_dict(*model);
  std::vector<std::string> our_keys;
  for (const auto& [key, tensor] : ours) our_keys.push_back(key);
  CHECK(our_keys == nlohmann::json::parse(meta.at("state_dict_keys")).get<std::vector<std::string>>());
  NamedTensors timm_state;
  for (const auto& [key, tensor] : file.tensors) {
    if (key.rfind("model.", 0) == 0) timm_state.emplace_back(key.substr(6), tensor);
  }
  const std::map<std::string, at::Tensor> timm_state_map(timm_state.begin(), timm_state.end());
  for (const auto& [key, tensor] : ours) {
    const auto it = timm_state_map.find(key);
    REQUIRE_MESSAGE(it != timm_state_map.end(), key);
    CHECK_MESSAGE((tensor.sizes() == it->second.sizes()), key);
    CHECK_MESSAGE((tensor.scalar_type() == it->second.scalar_type()), key);
  }
  CHECK(count_parameters(*model) == std::stoll(meta.at("param_count")));
  load_state_dict(*model, timm_state, /*strict=*/true);  // throws naming any key or shape mismatch
  const at::Tensor input = expected.at("input");

  ParityDiffs diffs;
  model->eval();
  {
    c10::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(input);
    diffs.eval = max_abs_diff(logits, expected.at("logits_eval"));
    CHECK_MESSAGE(all_close(logits, expected.at("logits_eval"), tol), c.id << " eval max abs diff " << diffs.eval);
  }
  diffs.bf16 = check_bf16_eval(c, timm_state, opts.bf16_tol, expected);
  if (opts.reparam) diffs.reparam = check_reparameterized(c, timm_state, expected, meta, tol);
  diffs.features = check_features_and_head(*model, c, expected, tol);
  diffs.intermediates = check_intermediates(*model, c, expected, meta, tol);
  model->train();
  at::manual_seed(kTrainSeed);  // as the oracle before its train step: random layers draw the same
  const at::Tensor logits = model->forward(input);
  diffs.train = max_abs_diff(logits, expected.at("logits_train"));
  CHECK_MESSAGE(all_close(logits, expected.at("logits_train"), tol), c.id << " train max abs diff " << diffs.train);
  const at::Tensor loss = at::cross_entropy_loss(logits, expected.at("target"));
  CHECK(all_close(loss, expected.at("loss"), tol));
  loss.backward();
  const auto params = model->named_parameters();
  const auto grad_keys = nlohmann::json::parse(meta.at("grad_keys")).get<std::vector<std::string>>();
  REQUIRE(!grad_keys.empty());
  REQUIRE(grad_keys.size() >= opts.min_grad_keys);
  for (const auto& key : grad_keys) {
    REQUIRE_MESSAGE(params.contains(key), key);
    const at::Tensor grad = params[key].grad();
    REQUIRE_MESSAGE(grad.defined(), key);
    const at::Tensor& timm_grad = expected.at("grad." + key);
    const double d = max_abs_diff(grad, timm_grad);
    diffs.grad = worst_diff(diffs.grad, d);
    // float32 summation error grows with the terms summed: above 1, the
    // absolute tolerance scales with the gradient's largest magnitude (a
    // 75 px Inception-V3 in train mode has gradients of 3e4 off by 0.04).
    const double max_grad = timm_grad.abs().max().item<double>();
    const Tolerance grad_tol{tol.atol * std::max(1.0, max_grad), tol.rtol};
    CHECK_MESSAGE(all_close(grad, timm_grad, grad_tol),
                  c.id << " grad " << key << " max abs diff " << d << " (max |grad| " << max_grad << ")");
  }
  // BatchNorm's running statistics moved as in timm (momentum, unbiased var).
  const auto buffers = model->named_buffers();
  for (const auto& key : opts.after_buffers) {
    REQUIRE_MESSAGE(buffers.contains(key), key);
    CHECK_MESSAGE(all_close(buffers[key], expected.at("after." + key), tol), key);
  }

  ModelArgs dp_args = parity_args(c);
  if (opts.takes_drop_path) dp_args.drop_path_rate = 0.2;
  ModelPtr dp_model = create_model(c.name, dp_args);
  check_drop_path_rates(*dp_model, nlohmann::json::parse(meta.at("drop_path_rates")).get<std::vector<double>>(), opts);
  MESSAGE(c.id << ": eval logits max abs diff " << diffs.eval << ", forward_features / forward_head " << diffs.features
               << ", forward_intermediates " << diffs.intermediates << ", bfloat16 " << diffs.bf16 << ", train "
               << diffs.train << ", grads " << diffs.grad << " (" << grad_keys.size() << " tensors)"
               << (opts.reparam ? ", reparameterized " + std::to_string(diffs.reparam) : std::string()));
  return diffs;
}

// A model of ours with perturbed norm/bias parameters (so none is at its
// identity init) and, after one train-mode forward, BatchNorm running
// statistics away from (0, 1), written for timm to load, with its eval logits
// as the probe.
inline void write_cpp_model(const ParityCase& c, const std::string& file_stem) {
  at::manual_seed(123);
  load_builtin_plugins();
  ModelPtr model = create_model(c.name, parity_args(c));
  c10::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    if (p.dim() <= 1) p.add_(at::randn_like(p) * 0.1);
  }
  const at::Tensor input = at::randn({c.batch, c.in_chans, c.height(), c.img_size});
  model->train();
  model->forward(input);  // moves any BatchNorm's running statistics
  model->eval();
  const at::Tensor logits = model->forward(input);
  write_safetensors(file_stem + ".cpp.safetensors", state_dict(*model));
  write_safetensors(file_stem + ".probe.safetensors", {{"input", input}, {"logits_eval", logits}});
}

// Both ways for every case: timm -> here (check_timm_to_cpp), here -> timm
// (the oracle's check mode fails the test on a mismatch).
inline void run_parity(const std::string& oracle, const std::vector<ParityCase>& cases, const ParityOptions& opts) {
  const ThreadCount one_thread(1);
  TempDir dir;
  const std::string cases_arg = cases_json(cases, opts).dump();
  MESSAGE(run_oracle(oracle, {"generate", "--dir", dir.path().string(), "--cases", cases_arg}));
  for (const auto& c : cases) {
    CAPTURE(c.id);
    const std::filesystem::path expected = dir / (c.id + ".expected.safetensors");
    check_timm_to_cpp(c, read_safetensors_file(expected.string()), opts);
    std::filesystem::remove(expected);  // a large model's weights are hundreds of MB
    write_cpp_model(c, (dir / c.id).string());
  }
  MESSAGE(run_oracle(oracle, {"check", "--dir", dir.path().string(), "--cases", cases_arg}));
}

inline std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// timm's group_matcher as JSON (a string, or a list of [pattern, suffix|null]) against ours, group by group.
inline void check_group_matcher(const GroupMatcher& ours, const nlohmann::json& timm_matcher) {
  REQUIRE(ours.size() == timm_matcher.size());
  for (const auto& [group, rules] : ours) {
    CAPTURE(group);
    REQUIRE(timm_matcher.contains(group));
    const auto& value = timm_matcher.at(group);
    std::vector<MatcherRule> expected;
    if (value.is_string()) {
      expected.push_back({value.get<std::string>(), std::nullopt});
    } else {
      for (const auto& rule : value) {
        std::optional<std::vector<double>> suffix;
        if (!rule.at(1).is_null()) suffix = rule.at(1).get<std::vector<double>>();
        expected.push_back({rule.at(0).get<std::string>(), suffix});
      }
    }
    REQUIRE(rules.size() == expected.size());
    for (size_t r = 0; r < rules.size(); ++r) {
      CHECK(rules[r].pattern == expected[r].pattern);
      CHECK(rules[r].suffix == expected[r].suffix);
    }
  }
}

// Every name at timm's defaults (num_classes the default tag's) but
// drop_path_rate 0.2 (which adds no state):
// same state_dict keys in order, same shapes and dtypes, same parameter count,
// same default pretrained cfg, no_weight_decay, group_matcher, default
// drop_rate, per-block drop-path rates and feature_info. Returns the oracle's JSON (its
// "list" has list_models results for `patterns`).
// The default pretrained cfg, no_weight_decay and group_matcher of `model`
// against the oracle's info entry `e` for its name.
inline void check_cfg_and_groups(const ClassifierImpl& model, const nlohmann::json& e) {
  const auto& cfg = model.pretrained_cfg();
  CHECK(cfg.input_size == e.at("input_size").get<std::vector<int64_t>>());
  CHECK(cfg.crop_pct == e.at("crop_pct").get<double>());
  const auto& test_size = e.at("test_input_size");
  CHECK(cfg.test_input_size ==
        (test_size.is_null() ? std::nullopt : std::optional(test_size.get<std::vector<int64_t>>())));
  const auto& test_crop = e.at("test_crop_pct");
  CHECK(cfg.test_crop_pct == (test_crop.is_null() ? std::nullopt : std::optional(test_crop.get<double>())));
  CHECK(cfg.interpolation == e.at("interpolation").get<std::string>());
  CHECK(cfg.mean == e.at("mean").get<std::vector<double>>());
  CHECK(cfg.std == e.at("std").get<std::vector<double>>());
  CHECK(cfg.crop_mode == e.at("crop_mode").get<std::string>());
  CHECK(cfg.first_conv == e.at("first_conv").get<std::string>());
  CHECK(cfg.classifier == e.at("classifier").get<std::string>());
  CHECK(cfg.hf_hub_id == e.at("hf_hub_id").get<std::string>());
  CHECK(cfg.num_classes == e.at("pretrained_num_classes").get<int64_t>());
  auto nwd = model.no_weight_decay();
  std::sort(nwd.begin(), nwd.end());
  CHECK(nwd == e.at("no_weight_decay").get<std::vector<std::string>>());
  check_group_matcher(model.group_matcher(false), e.at("group_matcher").at("fine"));
  check_group_matcher(model.group_matcher(true), e.at("group_matcher").at("coarse"));
}

inline nlohmann::json check_registered(const std::string& oracle, const std::vector<std::string>& names,
                                       const std::vector<std::string>& patterns, const ParityOptions& opts) {
  load_builtin_plugins();
  const auto info =
      nlohmann::json::parse(run_oracle(oracle, {"info", "--names", join(names), "--patterns", join(patterns)}));
  for (const auto& name : names) {
    CAPTURE(name);
    const auto& e = info.at("models").at(name);
    ModelArgs args;
    if (opts.takes_drop_path) args.drop_path_rate = 0.2;
    // timm's default num_classes is the default tag's (_update_default_model_kwargs):
    // 0 for weights without a classifier (DINO, orig_in21k).
    args.num_classes = e.at("pretrained_num_classes").get<int64_t>();
    ModelPtr model = create_model(name, args);
    const NamedTensors ours = state_dict(*model);
    std::vector<std::string> keys;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::string> dtypes;
    for (const auto& [key, tensor] : ours) {
      keys.push_back(key);
      shapes.emplace_back(tensor.sizes().begin(), tensor.sizes().end());
      dtypes.push_back(timm::dtype_name(tensor.scalar_type()));
    }
    CHECK(keys == e.at("keys").get<std::vector<std::string>>());
    CHECK(shapes == e.at("shapes").get<std::vector<std::vector<int64_t>>>());
    CHECK(dtypes == e.at("dtypes").get<std::vector<std::string>>());
    CHECK(count_parameters(*model) == e.at("param_count").get<int64_t>());
    check_cfg_and_groups(*model, e);
    // timm's default: no dropout unless --drop (not every timm model keeps the attribute).
    if (e.contains("drop_rate")) CHECK(e.at("drop_rate").get<double>() == ModelArgs{}.drop_rate);
    check_drop_path_rates(*model, e.at("drop_path_rates").get<std::vector<double>>(), opts);
    CHECK(feature_info_json(model->feature_info()) == e.at("feature_info"));
  }
  return info;
}

// Names too large to build here in full (ViT-g, EVA-g, ...), ours built with
// one block (the `depth` keyword) against timm's full model on the meta
// device: timm's state_dict keys, shapes and dtypes but those of blocks.1
// and later; timm's parameter count as ours plus (depth - 1) times blocks.0's,
// the depth being timm's number of feature levels (one per block); the
// first feature level; the pretrained cfg, no_weight_decay and groups.
inline void check_registered_depth1(const std::string& oracle, const std::vector<std::string>& names) {
  load_builtin_plugins();
  const auto info = nlohmann::json::parse(run_oracle(oracle, {"info", "--names", join(names), "--patterns", ""}));
  auto is_later_block = [](const std::string& key) {
    return key.rfind("blocks.", 0) == 0 && key.rfind("blocks.0.", 0) != 0;
  };
  for (const auto& name : names) {
    CAPTURE(name);
    const auto& e = info.at("models").at(name);
    ModelArgs args;
    args.num_classes = e.at("pretrained_num_classes").get<int64_t>();
    args.kwargs["depth"] = "1";
    ModelPtr model = create_model(name, args);
    const auto timm_keys = e.at("keys").get<std::vector<std::string>>();
    const auto timm_shapes = e.at("shapes").get<std::vector<std::vector<int64_t>>>();
    const auto timm_dtypes = e.at("dtypes").get<std::vector<std::string>>();
    std::vector<std::string> want_keys, keys, want_dtypes, dtypes;
    std::vector<std::vector<int64_t>> want_shapes, shapes;
    for (size_t i = 0; i < timm_keys.size(); ++i) {
      if (is_later_block(timm_keys[i])) continue;
      want_keys.push_back(timm_keys[i]);
      want_shapes.push_back(timm_shapes[i]);
      want_dtypes.push_back(timm_dtypes[i]);
    }
    for (const auto& [key, tensor] : state_dict(*model)) {
      keys.push_back(key);
      shapes.emplace_back(tensor.sizes().begin(), tensor.sizes().end());
      dtypes.push_back(timm::dtype_name(tensor.scalar_type()));
    }
    CHECK(keys == want_keys);
    CHECK(shapes == want_shapes);
    CHECK(dtypes == want_dtypes);
    int64_t block0 = 0;
    for (const auto& item : model->named_parameters()) {
      if (item.key().rfind("blocks.0.", 0) == 0) block0 += item.value().numel();
    }
    const auto depth = static_cast<int64_t>(e.at("feature_info").size());
    CHECK(count_parameters(*model) + (depth - 1) * block0 == e.at("param_count").get<int64_t>());
    REQUIRE(model->feature_info().size() == 1);
    CHECK(feature_info_json(model->feature_info())[0] == e.at("feature_info")[0]);
    check_cfg_and_groups(*model, e);
  }
}

// Fresh init statistics per state_dict entry against timm's (different RNG
// streams, so distributions, not values): constant tensors equal exactly;
// others have std within `std_rtol` of timm's (3x that for tensors under 1000
// values), mean within 6 / sqrt(numel) std, and min / max within 1.5 std of
// timm's: the extremes of two streams of the same truncated normal differ by
// up to about 1.3 std by chance (Swin's bias tables, 1014 and 8748 values:
// 4.65 against 3.52 std), while a truncation at 2 std instead of timm's
// absolute a, b puts the extremes of 10,000 draws about 1.8 std apart.
inline void check_init_stats(const std::string& oracle, const std::vector<std::string>& names, double std_rtol = 0.1) {
  load_builtin_plugins();
  const auto stats = nlohmann::json::parse(run_oracle(oracle, {"initstats", "--names", join(names)}));
  for (const auto& name : names) {
    CAPTURE(name);
    at::manual_seed(0);
    ModelPtr model = create_model(name, ModelArgs{});
    const auto& timm_stats = stats.at(name);
    for (const auto& [key, tensor] : state_dict(*model)) {
      CAPTURE(key);
      const auto& s = timm_stats.at(key);
      const at::Tensor t = tensor.to(at::kDouble);
      const double mean = t.mean().item<double>();
      const double std = t.numel() > 1 ? t.std().item<double>() : 0.0;
      const double timm_std = s.at(2).get<double>();
      if (timm_std == 0.0) {
        CHECK(std == 0.0);
        CHECK(mean == doctest::Approx(s.at(1).get<double>()).epsilon(1e-6));
        continue;
      }
      const double rtol = s.at(0).get<int64_t>() >= 1000 ? std_rtol : 3 * std_rtol;
      CHECK_MESSAGE(std::abs(std / timm_std - 1.0) <= rtol, "std ours " << std << " timm " << timm_std);
      // Two sample means of n values differ by ~sqrt(2 / n) std: allow 6 / sqrt(n) std.
      const double n = static_cast<double>(s.at(0).get<int64_t>());
      CHECK_MESSAGE(std::abs(mean - s.at(1).get<double>()) <= 6.0 * timm_std / std::sqrt(n) + 1e-12,
                    "mean ours " << mean << " timm " << s.at(1).get<double>());
      const double extreme_tol = 1.5 * timm_std;
      CHECK(std::abs(t.min().item<double>() - s.at(3).get<double>()) <= extreme_tol);
      CHECK(std::abs(t.max().item<double>() - s.at(4).get<double>()) <= extreme_tol);
    }
  }
}

// One train-mode step for check_grad_checkpointing: the logits, a fixed
// weighted sum of them as the loss, the input and parameter gradients, and
// what the CPU generator draws next.
struct GradCheckpointStep {
  at::Tensor logits;
  at::Tensor input_grad;
  std::vector<std::pair<std::string, at::Tensor>> grads;  // by parameter name; undefined: none
  at::Tensor next_draw;
};

inline GradCheckpointStep grad_checkpoint_step(ClassifierImpl& model, const at::Tensor& input) {
  model.train();
  model.zero_grad();
  const at::Tensor x = input.clone().requires_grad_(true);
  at::manual_seed(kTrainSeed);
  GradCheckpointStep step;
  step.logits = model.forward(x);
  const at::Tensor weights = at::linspace(-1.0, 1.0, step.logits.numel()).view_as(step.logits);
  (step.logits * weights).sum().backward();
  step.input_grad = x.grad();
  for (const auto& item : model.named_parameters()) step.grads.emplace_back(item.key(), item.value().grad());
  step.next_draw = at::rand({16}, input.options());  // the input's device's generator
  return step;
}

// forward_intermediates under set_grad_checkpointing(true) (`checkpointed`)
// against `plain` with the same weights, in train mode from the same seed:
// the same intermediates and final features within `tol`, and the same input
// gradient of a weighted sum of them all.
inline void check_checkpointed_intermediates(ClassifierImpl& plain, ClassifierImpl& checkpointed,
                                             const at::Tensor& input, const Tolerance& tol) {
  struct Run {
    std::vector<at::Tensor> outputs;  // the intermediates, then the final features
    at::Tensor input_grad;
  };
  auto run = [&](ClassifierImpl& model) {
    model.train();
    const at::Tensor x = input.clone().requires_grad_(true);
    at::manual_seed(kTrainSeed);
    const Intermediates result = model.forward_intermediates(x);
    Run out{result.intermediates, {}};
    out.outputs.push_back(result.final);
    at::Tensor loss = at::zeros({}, input.options());
    for (const auto& t : out.outputs) loss = loss + (t * at::linspace(-1.0, 1.0, t.numel()).view_as(t)).sum();
    loss.backward();
    out.input_grad = x.grad();
    return out;
  };
  const Run expected = run(plain);
  const Run ours = run(checkpointed);
  REQUIRE(ours.outputs.size() == expected.outputs.size());
  for (size_t i = 0; i < ours.outputs.size(); ++i) {
    CHECK_MESSAGE(all_close(ours.outputs[i], expected.outputs[i], tol), "forward_intermediates output " << i);
  }
  REQUIRE(ours.input_grad.defined());
  // The loss sums every level, so the input gradient adds many paths, in
  // another order once the stages are checkpointed: above 1, the absolute
  // tolerance scales with its largest magnitude (as run_parity's gradients).
  const double max_grad = expected.input_grad.abs().max().item<double>();
  CHECK_MESSAGE(all_close(ours.input_grad, expected.input_grad, {tol.atol * std::max(1.0, max_grad), tol.rtol}),
                "input gradient through forward_intermediates: max difference "
                    << max_abs_diff(ours.input_grad, expected.input_grad) << " (max |grad| " << max_grad << ")");
}

// --grad-checkpointing: a train step of `name` (drop path and dropout at 0.2,
// so the rerun must draw the plain run's masks) with
// set_grad_checkpointing(true) gives the plain step's logits, input gradient
// and parameter gradients within `tol` (the same weights, the same seed; on
// the CPU 1e-6, in fact bit for bit), and leaves the generator where the plain
// step does; forward_intermediates too (check_checkpointed_intermediates). On
// one thread, as the parity cases. A model that takes no drop path (timm
// refuses the argument: DenseNet) runs without one (`takes_drop_path` false);
// its own dropout rates then go in `kwargs`.
inline void check_grad_checkpointing(const std::string& name, int64_t height, int64_t width,
                                     std::map<std::string, std::string> kwargs = {},
                                     const c10::Device& device = c10::Device(c10::kCPU),
                                     const Tolerance& tol = Tolerance{1e-6, 0.0}, bool takes_drop_path = true) {
  CAPTURE(name);
  const ThreadCount one_thread(1);
  load_builtin_plugins();
  ModelArgs args;
  args.num_classes = kParityNumClasses;
  args.drop_rate = 0.2;
  if (takes_drop_path) args.drop_path_rate = 0.2;
  args.kwargs = std::move(kwargs);
  at::manual_seed(0);
  const ModelPtr plain = create_model(name, args);
  const ModelPtr checkpointed = create_model(name, args);
  load_state_dict(*checkpointed, state_dict(*plain));
  checkpointed->set_grad_checkpointing(true);
  plain->to(device);
  checkpointed->to(device);
  at::manual_seed(1);
  const at::Tensor input = at::randn({2, 3, height, width}).to(device);
  const GradCheckpointStep expected = grad_checkpoint_step(*plain, input);
  const GradCheckpointStep ours = grad_checkpoint_step(*checkpointed, input);

  CHECK(all_close(ours.logits, expected.logits, tol));
  REQUIRE(ours.input_grad.defined());
  CHECK(all_close(ours.input_grad, expected.input_grad, tol));
  REQUIRE(ours.grads.size() == expected.grads.size());
  for (size_t i = 0; i < ours.grads.size(); ++i) {
    const auto& [key, grad] = ours.grads[i];
    const at::Tensor& want = expected.grads[i].second;
    CHECK_MESSAGE(grad.defined() == want.defined(), key);
    if (grad.defined() && want.defined()) {
      CHECK_MESSAGE(all_close(grad, want, tol), key << ": max difference " << max_abs_diff(grad, want));
    }
  }
  CHECK(at::equal(ours.next_draw, expected.next_draw));
  check_checkpointed_intermediates(*plain, *checkpointed, input, tol);
}

}  // namespace timm::test
