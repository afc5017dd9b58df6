// The model interface every model plugin implements.
//
// A model is a torch::nn::Module classifier whose submodule names are timm's
// attribute names, so its state_dict keys equal timm's and checkpoints move
// both ways. Plugins follow the torch frontend's style (XxxOptions, XxxImpl,
// TORCH_MODULE(Xxx)) with XxxImpl deriving from ClassifierImpl.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "timm/models/features.hpp"

namespace timm {

inline constexpr double kImagenetMean[3] = {0.485, 0.456, 0.406};
inline constexpr double kImagenetStd[3] = {0.229, 0.224, 0.225};
// timm's OPENAI_CLIP_MEAN / OPENAI_CLIP_STD (CLIP-pretrained tags).
inline constexpr double kOpenaiClipMean[3] = {0.48145466, 0.4578275, 0.40821073};
inline constexpr double kOpenaiClipStd[3] = {0.26862954, 0.26130258, 0.27577711};

// A model's default data configuration, as timm's pretrained_cfg: the data
// pipeline knows a model only through this.
struct PretrainedCfg {
  std::vector<int64_t> input_size{3, 224, 224};  // C, H, W
  std::string interpolation = "bicubic";
  std::vector<double> mean{kImagenetMean[0], kImagenetMean[1], kImagenetMean[2]};
  std::vector<double> std{kImagenetStd[0], kImagenetStd[1], kImagenetStd[2]};
  double crop_pct = 0.875;
  std::string crop_mode = "center";
  std::string first_conv;  // state_dict prefix of the stem conv, e.g. "conv1"
  std::string classifier;  // state_dict prefix of the head, e.g. "fc"
  // timm's default pretrained weights on the Hugging Face hub, its
  // pretrained_cfg hf_hub_id ("timm/resnet50.a1_in1k"); empty when timm has
  // none. --pretrained reads them from the local hub cache.
  std::string hf_hub_id;
  int64_t num_classes = 1000;  // the classifier size of those weights
  // timm's pretrained_strict: false lets --pretrained / --pretrained-path skip
  // the file's keys the model lacks (Inception-V3's torchvision weights carry
  // AuxLogits.*, which timm's default model has not). Keys the model has and
  // the file lacks stay an error here, where timm's strict=False would leave
  // them at their random init without a word.
  bool pretrained_strict = true;
  // timm's test_input_size / test_crop_pct: the size and crop the weights are
  // evaluated at when they differ from the training ones (resnet50.a1_in1k:
  // trained at 224, tested at 288 with crop 1.0). The tools evaluate at them
  // unless --use-train-size, as validate.py's resolve_data_config(...,
  // use_test_size=True); unset where timm's cfg has none.
  std::optional<std::vector<int64_t>> test_input_size;  // C, H, W
  std::optional<double> test_crop_pct;
};

// The hf_hub_id of a model's default pretrained tag as timm names it,
// "timm/<model>.<tag>" ("timm/resnet50.a1_in1k"), from a plugin's table of
// default tags; "" when the table has no tag for `model` (timm has no
// pretrained weights for it).
inline std::string timm_hub_id(const std::string& model, const std::map<std::string, std::string>& default_tags) {
  const auto it = default_tags.find(model);
  return it == default_tags.end() ? "" : "timm/" + model + "." + it->second;
}

// One model's timm test_input_size (square, in pixels) and test_crop_pct
// (unset where timm's cfg names only the size).
struct TestSize {
  int64_t size;
  std::optional<double> crop_pct;
};

// Sets `cfg`'s test_input_size and test_crop_pct from a plugin's table of
// them by model name; leaves `cfg` as it is when the table has no `model`.
inline void set_test_size(PretrainedCfg& cfg, const std::string& model, const std::map<std::string, TestSize>& table) {
  const auto it = table.find(model);
  if (it == table.end()) return;
  cfg.test_input_size = std::vector<int64_t>{cfg.input_size.at(0), it->second.size, it->second.size};
  cfg.test_crop_pct = it->second.crop_pct;
}

// What timm's create_model passes to a model constructor.
struct ModelArgs {
  int64_t num_classes = 1000;
  int64_t in_chans = 3;
  double drop_rate = 0.0;
  std::optional<double> drop_path_rate;    // model default when unset
  std::optional<std::string> global_pool;  // model default when unset
  // Other create_model keyword arguments as text: --model-kwargs k=v and the
  // flags train.py passes as keywords (--drop-block: drop_block_rate); a model
  // throws UsageError on a key it does not know (check_model_kwargs).
  std::map<std::string, std::string> kwargs;
};

// One rule of timm's group_matcher: parameters whose name matches `pattern`
// (a regex anchored at the start, as Python's re.match) belong to the group
// numbered by the pattern's capture groups (as integers), followed by
// `suffix` when set (timm's `(r'^norm', (99999,))`).
struct MatcherRule {
  std::string pattern;
  std::optional<std::vector<double>> suffix;
};

// timm's model.group_matcher(coarse): named groups in timm's dict order
// ("stem" first, then "blocks", ...), each a list of rules. A plain string
// value in timm is one rule without a suffix. Layer decay and grouped
// parameter listings are built from it.
using GroupMatcher = std::vector<std::pair<std::string, std::vector<MatcherRule>>>;

// A batch of images cut into patches, as timm's NaFlex collator makes it (the
// dict NaFlexVit.forward takes): each sample's patches in row-major order of
// its own patch grid, padded to a common length N. Each patch's pixels are
// laid out as the model's patchify_channels_last() says.
struct PatchBatch {
  at::Tensor patches;      // (B, N, P*P*C) float, each patch's pixels flat (Ph, Pw, C) or (C, Ph, Pw)
  at::Tensor patch_coord;  // (B, N, 2) int64, each patch's (y, x) in its sample's grid
  at::Tensor patch_valid;  // (B, N) bool, false for padding
};

class ClassifierImpl : public torch::nn::Module {
 public:
  // Logits, (N, num_classes). A model that implements the two halves below
  // returns forward_head(forward_features(x)), as timm's models do.
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // timm's model.forward_features(x): the unpooled features before the head,
  // NCHW maps for a CNN, the token sequence after the final norm for a ViT.
  // The default throws Error naming the model and its plugin: a plugin that
  // does not implement it still builds and loads, and fails only here.
  virtual torch::Tensor forward_features(torch::Tensor x);
  // timm's model.forward_head(x, pre_logits): from forward_features' output,
  // the global pool, the head's norm / dropout as the model has them, then the
  // classifier; with pre_logits the pooled features before the classifier
  // (N, num_features). num_classes 0 (no classifier) returns the same either
  // way. The default throws as forward_features' does. Overrides repeat the
  // default argument (a default is taken from the static type).
  virtual torch::Tensor forward_head(torch::Tensor x, bool pre_logits = false);
  // timm's model.feature_info: the model's feature levels in forward order
  // (the stem, then each stage for a CNN; each block for a ViT), the levels
  // forward_intermediates' indices count. The default throws as
  // forward_features' does.
  virtual std::vector<FeatureInfo> feature_info() const;
  // timm's model.forward_intermediates(x, indices, norm, stop_early,
  // output_fmt, intermediates_only): the feature maps of the levels taken, in
  // forward order, and (unless intermediates_only) the final features, which
  // equal forward_features(x) when the last level is reached. Honours
  // set_grad_checkpointing as forward_features does. The default throws as
  // forward_features' does.
  virtual Intermediates forward_intermediates(torch::Tensor x,
                                              const IntermediatesOptions& options = IntermediatesOptions());
  // timm's forward(patch_dict) of a NaFlex model: the logits of a batch of
  // variable-size images given as patches (PatchBatch), padding masked out of
  // attention and pooling. The default throws UsageError naming the model: it
  // takes images only (the NaFlex loader needs a naflexvit_* model).
  virtual torch::Tensor forward_patches(const PatchBatch& batch);
  // timm's model.get_patch_size() (height, width), which the NaFlex loader
  // cuts images by; nullopt for a model that takes no patches.
  virtual std::optional<std::array<int64_t, 2>> patch_size() const { return std::nullopt; }
  // timm's patchify_channels_last: the flat layout of each patch the model
  // takes, (Ph, Pw, C) when true (timm's default), (C, Ph, Pw) when false
  // (HF / Gemma4 style; train.py's --naflex-patchify-channels-first). Only
  // meaningful when patch_size() has a value.
  virtual bool patchify_channels_last() const { return true; }
  // Whether the model has a distillation head (DeiT's
  // VisionTransformerDistilled): --kd-distill-type token trains it.
  virtual bool has_distillation_head() const { return false; }
  // timm's forward with set_distilled_training(True) in training mode: the
  // class head's and the distillation head's logits, each from its own token,
  // where forward() returns their mean. The default throws UsageError naming
  // the model: it has no distillation head.
  virtual std::pair<torch::Tensor, torch::Tensor> forward_distilled(torch::Tensor x);
  // timm's model.set_grad_checkpointing(enable) (--grad-checkpointing):
  // checkpoint the blocks where timm's model does (timm/models/grad_checkpoint.hpp),
  // trading one more forward pass per step for the activation memory of the
  // blocks. The default throws UsageError naming the model when enabling (it
  // has no checkpointed forward); disabling it is then a no-op.
  virtual void set_grad_checkpointing(bool enable);
  // timm's reparameterize_model(model) (validate.py's and benchmark.py's
  // --reparam): folds each training-time multi-branch block (RepVGG,
  // MobileOne, ...) into its inference form in place, from the BatchNorms'
  // running statistics, and returns the number of blocks folded. Eval outputs
  // are unchanged up to float rounding and the state_dict takes timm's folded
  // keys (reparam_conv.*); a folded block is not folded again. The default
  // folds nothing, as timm's walk over a model without such blocks.
  virtual int64_t reparameterize() { return 0; }
  virtual int64_t num_classes() const = 0;
  virtual const PretrainedCfg& pretrained_cfg() const = 0;
  // Parameter names (fnmatch patterns) excluded from weight decay, as timm's
  // model.no_weight_decay().
  virtual std::vector<std::string> no_weight_decay() const { return {}; }
  // timm's model.group_matcher(coarse); empty when the model has none (then
  // --layer-decay is an error naming the model).
  virtual GroupMatcher group_matcher(bool coarse) const {
    (void)coarse;
    return {};
  }

  // The name the model was created under and the plugin file that registered
  // it (RegistryEntry::origin), for messages; create_model sets both. A model
  // built without create_model has empty ones (messages then use the class
  // name, Module::name()).
  const std::string& registered_name() const { return registered_name_; }
  const std::string& registered_origin() const { return registered_origin_; }
  void set_registered(std::string name, std::string origin) {
    registered_name_ = std::move(name);
    registered_origin_ = std::move(origin);
  }

 private:
  std::string registered_name_;
  std::string registered_origin_;
};

using ModelPtr = std::shared_ptr<ClassifierImpl>;

// The model as errors name it: "model 'resnet50' (from plugin
// '/abs/libtimm_models_resnet.so')", or its class name for a model built
// without create_model. Plugins pass it to check_output_fmt and their own
// refusals instead of keeping a copy of their name.
std::string describe_model(const ClassifierImpl& model);

using ModelFactory = std::function<ModelPtr(const ModelArgs&)>;

// Creates a registered model by name from the global registry; an unknown
// name throws UsageError with the nearest known names.
ModelPtr create_model(const std::string& name, const ModelArgs& args);

// Throws UsageError if `args.kwargs` has a key not in `known`.
void check_model_kwargs(const std::string& model, const ModelArgs& args, const std::vector<std::string>& known);

// A keyword argument's value (--model-kwargs key=value, or a flag that train.py
// passes to create_model, such as --drop-block's drop_block_rate) read as a
// number, or as a bool ("true"/"True"/"1", "false"/"False"/"0"); nullopt when
// `key` is absent. Throws UsageError naming the model, key=value and what was
// expected.
std::optional<double> model_kwarg_double(const std::string& model, const ModelArgs& args, const std::string& key);
std::optional<bool> model_kwarg_bool(const std::string& model, const ModelArgs& args, const std::string& key);
// A keyword argument's value read as an integer in [1, 65536] (a size, a
// width, a depth: bounded so a typo cannot ask for a runaway allocation);
// nullopt when `key` is absent. Throws UsageError naming the model,
// key=value and the range otherwise.
std::optional<int64_t> model_kwarg_positive_int(const std::string& model, const ModelArgs& args,
                                                const std::string& key);

// The checks every model makes of its ModelArgs, for a model's constructor
// to call first: num_classes >= 0 (0: no classifier), in_chans >= 1,
// drop_rate and drop_path_rate (when set) in [0, 1] (NaN rejected), and no
// --model-kwargs key outside `known_kwargs` (check_model_kwargs). Throws
// UsageError naming the model, the argument, its value and what was
// expected, e.g. "resnet50: drop_rate must be in [0, 1], got 1.5".
// global_pool and the kwargs' values are the model's to check.
void validate_model_args(const std::string& model, const ModelArgs& args,
                         const std::vector<std::string>& known_kwargs = {});

// The number of parameter values (sum of numel over model.parameters()), as
// timm's param_count: every tool and test counts through this.
int64_t count_parameters(const torch::nn::Module& model);

}  // namespace timm
