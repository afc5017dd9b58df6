#include "timm/layers/mlp.hpp"

#include <ostream>
#include <string>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "timm/base/error.hpp"
#include "timm/layers/linear.hpp"

namespace timm::layers {
namespace {

// Mlp's fc1 / fc2: the SDK's Linear (Python's F.linear) or a 1x1 Conv2d.
torch::nn::AnyModule make_fc(int64_t in, int64_t out, bool bias, bool use_conv) {
  namespace nn = torch::nn;
  if (use_conv) return nn::AnyModule(nn::Conv2d(nn::Conv2dOptions(in, out, 1).bias(bias)));
  return nn::AnyModule(layers::Linear(nn::LinearOptions(in, out).bias(bias)));
}

// MlpOptions and ConvMlpOptions: the checks and widths their modules share.
template <class Options>
void check_mlp_options(const char* what, const Options& options) {
  if (options.in_features() < 1) {
    throw UsageError(std::string(what) + ": in_features must be >= 1, got " + std::to_string(options.in_features()));
  }
  if (options.drop() < 0.0 || options.drop() > 1.0) {
    throw UsageError(std::string(what) + ": drop must be in [0, 1], got " + std::to_string(options.drop()));
  }
}

// timm's hidden_features or in_features, out_features or in_features.
struct MlpWidths {
  int64_t in, hidden, out;
};

template <class Options>
MlpWidths mlp_widths(const Options& options) {
  const int64_t in = options.in_features();
  return {in, options.hidden_features() > 0 ? options.hidden_features() : in,
          options.out_features() > 0 ? options.out_features() : in};
}

}  // namespace

MlpImpl::MlpImpl(const MlpOptions& options_) : options(options_) {
  check_mlp_options("Mlp", options);
  reset();
}

void MlpImpl::reset() {
  const auto [in, hidden, out] = mlp_widths(options);
  fc1 = make_fc(in, hidden, options.bias(), options.use_conv());
  register_module("fc1", fc1.ptr());
  act = register_module("act", create_act(options.act_layer()));
  drop1 = register_module("drop1", torch::nn::Dropout(options.drop()));
  fc2 = make_fc(hidden, out, options.bias(), options.use_conv());
  register_module("fc2", fc2.ptr());
  drop2 = register_module("drop2", torch::nn::Dropout(options.drop()));
}

void MlpImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::Mlp(in_features=" << options.in_features() << ", act=" << options.act_layer()
         << (options.use_conv() ? ", use_conv=true" : "") << ")";
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  at::Tensor y = drop1(act(fc1.forward(x)));
  return drop2(fc2.forward(y));
}

GlobalResponseNormMlpImpl::GlobalResponseNormMlpImpl(const MlpOptions& options_) : options(options_) {
  check_mlp_options("GlobalResponseNormMlp", options);
  reset();
}

void GlobalResponseNormMlpImpl::reset() {
  const auto [in, hidden, out] = mlp_widths(options);
  fc1 = make_fc(in, hidden, options.bias(), options.use_conv());
  register_module("fc1", fc1.ptr());
  act = register_module("act", create_act(options.act_layer()));
  drop1 = register_module("drop1", torch::nn::Dropout(options.drop()));
  grn =
      register_module("grn", GlobalResponseNorm(GlobalResponseNormOptions(hidden).channels_last(!options.use_conv())));
  fc2 = make_fc(hidden, out, options.bias(), options.use_conv());
  register_module("fc2", fc2.ptr());
  drop2 = register_module("drop2", torch::nn::Dropout(options.drop()));
}

void GlobalResponseNormMlpImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::GlobalResponseNormMlp(in_features=" << options.in_features()
         << ", act=" << options.act_layer() << (options.use_conv() ? ", use_conv=true" : "") << ")";
}

at::Tensor GlobalResponseNormMlpImpl::forward(const at::Tensor& x) {
  at::Tensor y = grn(drop1(act(fc1.forward(x))));
  return drop2(fc2.forward(y));
}

ConvMlpImpl::ConvMlpImpl(const ConvMlpOptions& options_) : options(options_) {
  check_mlp_options("ConvMlp", options);
  if (!options.norm_layer().empty() && options.norm_layer() != "layernorm2d") {
    throw UsageError("ConvMlp: norm_layer " + in_quotes(options.norm_layer()) +
                     " is not supported (expected '' or 'layernorm2d')");
  }
  reset();
}

void ConvMlpImpl::reset() {
  namespace nn = torch::nn;
  const auto [in, hidden, out] = mlp_widths(options);
  fc1 = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(in, hidden, 1).bias(options.bias())));
  if (options.norm_layer() == "layernorm2d") norm = register_module("norm", LayerNorm2d(hidden));
  act = register_module("act", create_act(options.act_layer()));
  drop = register_module("drop", nn::Dropout(options.drop()));
  fc2 = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(hidden, out, 1).bias(options.bias())));
}

void ConvMlpImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::ConvMlp(in_features=" << options.in_features() << ", act=" << options.act_layer()
         << (options.norm_layer().empty() ? "" : ", norm=" + options.norm_layer()) << ")";
}

at::Tensor ConvMlpImpl::forward(const at::Tensor& x) {
  at::Tensor y = fc1(x);
  if (norm) y = norm(y);
  return fc2(drop(act(y)));
}

namespace {

// GluMlp's and SwiGLU's norm_layer: "" or "layernorm".
void check_norm_layer(const char* what, const std::string& norm_layer) {
  if (!norm_layer.empty() && norm_layer != "layernorm") {
    throw UsageError(std::string(what) + ": norm_layer " + in_quotes(norm_layer) +
                     " is not supported (expected '' or 'layernorm')");
  }
}

}  // namespace

GluMlpImpl::GluMlpImpl(const GluMlpOptions& options_) : options(options_) {
  check_mlp_options("GluMlp", options);
  check_norm_layer("GluMlp", options.norm_layer());
  if (mlp_widths(options).hidden % 2 != 0) {
    throw UsageError("GluMlp: hidden_features must be even (two halves, one the gate), got " +
                     std::to_string(mlp_widths(options).hidden));
  }
  reset();
}

// Registration order is timm's: fc1, act, drop1, norm, fc2, drop2.
void GluMlpImpl::reset() {
  namespace nn = torch::nn;
  const auto [in, hidden, out] = mlp_widths(options);
  fc1 = register_module("fc1", layers::Linear(nn::LinearOptions(in, hidden).bias(options.bias())));
  act = register_module("act", create_act(options.act_layer()));
  drop1 = register_module("drop1", nn::Dropout(options.drop()));
  if (!options.norm_layer().empty()) norm = register_module("norm", LayerNorm(hidden / 2));
  fc2 = register_module("fc2", layers::Linear(nn::LinearOptions(hidden / 2, out).bias(options.bias())));
  drop2 = register_module("drop2", nn::Dropout(options.drop()));
}

void GluMlpImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::GluMlp(in_features=" << options.in_features() << ", act=" << options.act_layer()
         << (options.gate_last() ? "" : ", gate first") << (options.norm_layer().empty() ? "" : ", norm") << ")";
}

at::Tensor GluMlpImpl::forward(const at::Tensor& x) {
  const auto halves = fc1(x).chunk(2, -1);
  at::Tensor y = options.gate_last() ? halves[0] * act(halves[1]) : act(halves[0]) * halves[1];
  y = drop1(y);
  if (norm) y = norm(y);
  return drop2(fc2(y));
}

SwiGLUImpl::SwiGLUImpl(const SwiGLUOptions& options_) : options(options_) {
  check_mlp_options("SwiGLU", options);
  check_norm_layer("SwiGLU", options.norm_layer());
  if (options.align_to() < 0) {
    throw UsageError("SwiGLU: align_to must be >= 0, got " + std::to_string(options.align_to()));
  }
  reset();
}

int64_t SwiGLUImpl::hidden_width() const {
  const int64_t hidden = mlp_widths(options).hidden;
  const int64_t align = options.align_to();
  return align > 0 ? (hidden + align - 1) / align * align : hidden;
}

// Registration order is timm's: fc1_g, fc1_x, act, drop1, norm, fc2, drop2.
void SwiGLUImpl::reset() {
  namespace nn = torch::nn;
  const auto widths = mlp_widths(options);
  const int64_t hidden = hidden_width();
  fc1_g = register_module("fc1_g", layers::Linear(nn::LinearOptions(widths.in, hidden).bias(options.bias())));
  fc1_x = register_module("fc1_x", layers::Linear(nn::LinearOptions(widths.in, hidden).bias(options.bias())));
  act = register_module("act", create_act(options.act_layer()));
  drop1 = register_module("drop1", nn::Dropout(options.drop()));
  if (!options.norm_layer().empty()) norm = register_module("norm", LayerNorm(hidden));
  fc2 = register_module("fc2", layers::Linear(nn::LinearOptions(hidden, widths.out).bias(options.bias())));
  drop2 = register_module("drop2", nn::Dropout(options.drop()));
}

void SwiGLUImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::SwiGLU(in_features=" << options.in_features() << ", hidden=" << hidden_width()
         << ", act=" << options.act_layer() << (options.norm_layer().empty() ? "" : ", norm") << ")";
}

at::Tensor SwiGLUImpl::forward(const at::Tensor& x) {
  at::Tensor y = drop1(act(fc1_g(x)) * fc1_x(x));
  if (norm) y = norm(y);
  return drop2(fc2(y));
}

}  // namespace timm::layers
