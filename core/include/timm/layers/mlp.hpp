// The MLP of transformer and ConvNeXt blocks, as timm's layers/mlp.py Mlp:
// fc1 -> act -> drop1 -> fc2 -> drop2. fc1 and fc2 are Linear layers on
// channels-last input, or 1x1 Conv2d on NCHW input with use_conv (timm's
// Mlp(use_conv=True), which ConvNeXt's conv_mlp variants use); either way
// the state_dict keys are fc1.{weight,bias} and fc2.{weight,bias} as timm's.
// ConvMlp is timm's ConvMlp: 1x1 convs on NCHW with an optional norm after
// fc1 (GlobalContext's LayerNorm2d). GlobalResponseNormMlp is timm's
// GlobalResponseNormMlp (ConvNeXt-V2): Mlp with a GlobalResponseNorm "grn"
// after drop1. GluMlp and SwiGLU are timm's gated MLPs (EVA-02): one fc1 whose
// output halves gate each other, or two (fc1_g, fc1_x), with an optional
// LayerNorm before fc2.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "timm/layers/activations.hpp"
#include "timm/layers/grn.hpp"
#include "timm/layers/linear.hpp"
#include "timm/layers/norm.hpp"

namespace timm::layers {

struct MlpOptions {
  /* implicit */ MlpOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, hidden_features) = 0;  // 0: in_features
  TORCH_ARG(int64_t, out_features) = 0;     // 0: in_features
  TORCH_ARG(std::string, act_layer) = "gelu";
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, drop) = 0.0;  // both dropouts, as timm's drop=float
  TORCH_ARG(bool, use_conv) = false;
};

class MlpImpl : public torch::nn::Cloneable<MlpImpl> {
 public:
  explicit MlpImpl(const MlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  MlpOptions options;
  torch::nn::AnyModule fc1;  // Linear, or Conv2d 1x1 with use_conv
  Activation act{nullptr};
  torch::nn::Dropout drop1{nullptr};
  torch::nn::AnyModule fc2;
  torch::nn::Dropout drop2{nullptr};
};
TORCH_MODULE(Mlp);

struct ConvMlpOptions {
  /* implicit */ ConvMlpOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, hidden_features) = 0;  // 0: in_features
  TORCH_ARG(int64_t, out_features) = 0;     // 0: in_features
  TORCH_ARG(std::string, act_layer) = "relu";
  // timm's norm_layer: "" (nn.Identity, no keys) or "layernorm2d" (LayerNorm2d, eps 1e-6).
  TORCH_ARG(std::string, norm_layer) = "";
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, drop) = 0.0;
};

// timm's ConvMlp: fc1 (1x1 conv) -> norm -> act -> drop -> fc2 (1x1 conv);
// keys fc1.*, [norm.*], fc2.*. Throws UsageError for in_features < 1, drop
// outside [0, 1] or an unknown norm_layer.
class ConvMlpImpl : public torch::nn::Cloneable<ConvMlpImpl> {
 public:
  explicit ConvMlpImpl(const ConvMlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  ConvMlpOptions options;
  torch::nn::Conv2d fc1{nullptr};
  LayerNorm2d norm{nullptr};  // null unless norm_layer is "layernorm2d"
  Activation act{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::Conv2d fc2{nullptr};
};
TORCH_MODULE(ConvMlp);

// timm's GlobalResponseNormMlp: fc1 -> act -> drop1 -> grn -> fc2 -> drop2,
// keys fc1.*, grn.{weight,bias}, fc2.*. Takes MlpOptions: Linear layers and a
// channels-last GRN, or with use_conv 1x1 convs and an NCHW GRN. Throws
// UsageError as Mlp.
class GlobalResponseNormMlpImpl : public torch::nn::Cloneable<GlobalResponseNormMlpImpl> {
 public:
  explicit GlobalResponseNormMlpImpl(const MlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  MlpOptions options;
  torch::nn::AnyModule fc1;
  Activation act{nullptr};
  torch::nn::Dropout drop1{nullptr};
  GlobalResponseNorm grn{nullptr};
  torch::nn::AnyModule fc2;
  torch::nn::Dropout drop2{nullptr};
};
TORCH_MODULE(GlobalResponseNormMlp);

struct GluMlpOptions {
  /* implicit */ GluMlpOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  // fc1's width, even: two halves of hidden_features / 2, one the gate. 0: in_features.
  TORCH_ARG(int64_t, hidden_features) = 0;
  TORCH_ARG(int64_t, out_features) = 0;  // 0: in_features
  TORCH_ARG(std::string, act_layer) = "sigmoid";
  // "" (none) or "layernorm" (timm's LayerNorm, eps 1e-6, over hidden_features / 2).
  TORCH_ARG(std::string, norm_layer) = "";
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, drop) = 0.0;  // both dropouts
  // true: the second half of fc1's output is the gate, x1 * act(x2); false:
  // the first, act(x1) * x2 (timm's SwiGLUPacked, EVA-02's).
  TORCH_ARG(bool, gate_last) = true;
};

// timm's GluMlp (Linear layers, no use_conv): fc1 -> halves -> gated product
// -> drop1 -> norm -> fc2 -> drop2; keys fc1.*, [norm.*], fc2.*. Throws
// UsageError for in_features < 1, an odd hidden width, drop outside [0, 1]
// or an unknown norm_layer.
class GluMlpImpl : public torch::nn::Cloneable<GluMlpImpl> {
 public:
  explicit GluMlpImpl(const GluMlpOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  GluMlpOptions options;
  layers::Linear fc1{nullptr};
  Activation act{nullptr};
  torch::nn::Dropout drop1{nullptr};
  LayerNorm norm{nullptr};  // null without norm_layer
  layers::Linear fc2{nullptr};
  torch::nn::Dropout drop2{nullptr};
};
TORCH_MODULE(GluMlp);

struct SwiGLUOptions {
  /* implicit */ SwiGLUOptions(int64_t in_features) : in_features_(in_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, hidden_features) = 0;  // 0: in_features
  TORCH_ARG(int64_t, out_features) = 0;     // 0: in_features
  TORCH_ARG(std::string, act_layer) = "silu";
  // "" (none) or "layernorm" (timm's LayerNorm, eps 1e-6, over the hidden width).
  TORCH_ARG(std::string, norm_layer) = "";
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, drop) = 0.0;     // both dropouts
  TORCH_ARG(int64_t, align_to) = 0;  // > 0: the hidden width rounded up to a multiple
};

// timm's SwiGLU: act(fc1_g(x)) * fc1_x(x) -> drop1 -> norm -> fc2 -> drop2;
// keys fc1_g.*, fc1_x.*, [norm.*], fc2.*. Throws UsageError as GluMlp (and
// for a negative align_to).
class SwiGLUImpl : public torch::nn::Cloneable<SwiGLUImpl> {
 public:
  explicit SwiGLUImpl(const SwiGLUOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  at::Tensor forward(const at::Tensor& x);

  int64_t hidden_width() const;  // hidden_features after align_to

  SwiGLUOptions options;
  layers::Linear fc1_g{nullptr};
  layers::Linear fc1_x{nullptr};
  Activation act{nullptr};
  torch::nn::Dropout drop1{nullptr};
  LayerNorm norm{nullptr};  // null without norm_layer
  layers::Linear fc2{nullptr};
  torch::nn::Dropout drop2{nullptr};
};
TORCH_MODULE(SwiGLU);

}  // namespace timm::layers
