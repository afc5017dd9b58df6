#include "timm/tools/eval_setup.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <ATen/ops/_to_copy.h>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/naflex.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/layers/fast_norm.hpp"
#include "timm/log/log.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/test_time_pool.hpp"
#include "timm/train/amp.hpp"

namespace timm {
void add_model_data_flags(ToolArgs& args, const std::string& default_model) {
  args.add("model", "m", default_model, "model architecture name");
  args.add("img-size", "", "", "input image dimension, uses model default if empty");
  args.add_list("input-size", "", "full input dimensions C H W, uses model default if empty");
  args.add("in-chans", "", "", "input channels (default: the dataset's, else 3)");
  args.add("crop-pct", "", "", "input image center crop percent (eval only)");
  args.add("crop-mode", "", "",
           "crop mode: a registered crop (timm's: center, squash, border; timm-run --list-augmentations)");
  args.add_list("mean", "", "override mean pixel value of dataset");
  args.add_list("std", "", "override std deviation of dataset");
  args.add("interpolation", "", "", "image resize interpolation type (overrides model)");
  args.add("num-classes", "", "", "number classes in dataset (default: the dataset's)");
  args.add("gp", "", "", "global pool type, model default when unset");
  args.add_list("model-kwargs", "", "model keyword arguments k=v");
}

void add_eval_model_flags(ToolArgs& args) {
  args.add_switch("amp", "", "use native Torch AMP (CPU autocast in --amp-dtype) for mixed precision");
  args.add("amp-dtype", "", "float16",
           "lower precision AMP dtype: float16 or bfloat16 (bfloat16 is the fast one on a CPU)");
  args.add("model-dtype", "", "",
           "model dtype override (non-AMP): float32 (default), float16 or bfloat16; the weights and the input in it");
  args.add_switch("channels-last", "", "use channels_last memory layout");
  add_fast_norm_flag(args);
  args.add_switch("pretrained", "",
                  "use the model's default pretrained weights from the local Hugging Face hub cache "
                  "(ignored with --checkpoint)");
}

void add_runtime_flags(ToolArgs& args, bool num_gpu) {
  args.add("device", "", "cpu", "device to run on: cpu (the tools run on the CPU; timm-run also trains on CUDA)");
  if (num_gpu) args.add("num-gpu", "", "1", "number of GPUs (DataParallel): 1");
  args.add_switch("use-train-size", "",
                  "use the model's train input size and crop even where its pretrained cfg names test ones "
                  "(timm-validate and timm-benchmark use the test ones by default, as validate.py and benchmark.py; "
                  "timm-infer, as inference.py, always the train ones)");
  for (const std::string flag : {"torchscript", "torchcompile", "torchcompile-mode", "fuser"}) {
    args.add_refused(flag, find_flag(flag)->unsupported);
  }
  args.add_refused("aot-autograd", "AOT Autograd compiles Python models; timm-cpp's models are C++");
}

void check_runtime_flags(const ToolArgs& args) {
  if (args.get("device") != "cpu") {
    throw UsageError("--device " + in_quotes(args.get("device")) +
                     ": the tools run on the CPU only (--device cpu); timm-run trains on CUDA too");
  }
  if (args.given("num-gpu") && args.get_int("num-gpu") != 1) {
    throw UsageError("--num-gpu " + args.get("num-gpu") +
                     ": expected 1 (DataParallel over several GPUs is not supported; timm-run trains on several with "
                     "distributed_train.sh)");
  }
}

void add_reparam_flag(ToolArgs& args) {
  args.add_switch("reparam", "",
                  "reparameterize the model: fold multi-branch blocks (RepVGG, MobileOne, FastViT, GhostNetV3) into "
                  "single convs for inference");
}

void add_fast_norm_flag(ToolArgs& args) {
  args.add_switch("fast-norm", "", "enable experimental fast-norm (norm layers in the AMP dtype)");
}

void set_fast_norm_if_asked(const ToolArgs& args) {
  if (args.get_switch("fast-norm")) layers::set_fast_norm(true);
}

std::vector<std::string> read_model_names(const std::string& flag, const std::string& file) {
  std::ifstream in(file);
  if (!in) throw UsageError("--" + flag + " " + in_quotes(file) + ": cannot open the file");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  if (names.empty()) throw UsageError("--" + flag + " " + in_quotes(file) + ": no model names in it");
  return names;
}

std::vector<std::string> models_matching(const std::string& flag, const std::string& pattern) {
  auto names = Registry::global().list(PluginKind::kModel, pattern);
  if (names.empty()) throw UsageError("--" + flag + " " + in_quotes(pattern) + ": no registered model matches it");
  return names;
}

void add_test_pool_flag(ToolArgs& args) {
  args.add_switch("test-pool", "",
                  "enable test time pool: a CNN given images larger than its pretrained cfg's input size pools its "
                  "classifier's outputs over windows of the training-size feature map (timm's TestTimePoolHead)");
}

ModelPtr test_pool_if_asked(const ToolArgs& args, ModelPtr model, const std::string& model_name,
                            DataConfig& data_config) {
  if (!args.get_switch("test-pool")) return model;
  auto [pooled_model, pooled] = apply_test_time_pool(std::move(model), model_name, data_config);
  if (pooled) data_config.crop_pct = 1.0;
  return pooled_model;
}

void reparameterize_if_asked(const ToolArgs& args, ClassifierImpl& model) {
  if (!args.get_switch("reparam")) return;
  const int64_t folded = model.reparameterize();
  log_info(
      format("Reparameterized %s: %lld blocks folded", describe_model(model).c_str(), static_cast<long long>(folded)));
}

EvalPrecision eval_precision(const ToolArgs& args) {
  EvalPrecision precision;
  // validate.py's order: the model dtype's choices, then AMP's rules.
  if (auto name = args.get_optional("model-dtype")) precision.model_dtype = parse_model_dtype(*name);
  const bool amp = args.get_switch("amp");
  check_amp_model_dtype(amp, precision.model_dtype);
  const c10::ScalarType dtype = parse_amp_dtype(args.get("amp-dtype"));
  if (amp) precision.amp_dtype = dtype;
  precision.channels_last = args.get_switch("channels-last");
  // validate.py's set_fast_norm(), before the model is built.
  set_fast_norm_if_asked(args);
  return precision;
}

std::string describe_eval_precision(const EvalPrecision& precision, const std::string& doing) {
  if (precision.amp_dtype) {
    return doing + " in mixed precision with native PyTorch AMP (" + dtype_name(*precision.amp_dtype) +
           " autocast on the CPU).";
  }
  return doing + " in " + dtype_name(precision.model_dtype) + ". AMP not enabled.";
}

int64_t pretrained_num_classes(const std::string& model_name) {
  ModelArgs probe_args;
  probe_args.num_classes = 2;  // a small probe; the cfg does not depend on it
  return create_model(model_name, probe_args)->pretrained_cfg().num_classes;
}

void add_dataset_flags(ToolArgs& args, int64_t default_batch, int64_t default_workers) {
  args.add("data-dir", "", "", "path to dataset root (default: Fashion-MNIST)");
  args.add("dataset", "", "", "dataset type: '' (image folder) or fashion-mnist");
  args.add("split", "", "validation", "dataset split");
  args.add("class-map", "", "", "path to class to idx mapping file (.txt: one class name per line, or .pkl)");
  args.add("num-samples", "", "", "use the first N samples of the split");
  args.add("batch-size", "b", std::to_string(default_batch), "mini-batch size");
  args.add("workers", "j", std::to_string(default_workers), "number of data loading workers");
  args.add("log-freq", "", "10", "batch logging frequency");
}

Config data_flags_config(const ToolArgs& args) {
  Config config;
  if (auto v = args.get_optional_int("img-size")) config.set_explicit("img_size", *v);
  if (args.given("input-size")) {
    std::vector<int64_t> size;
    for (const auto& s : args.get_list("input-size")) size.push_back(std::stoll(s));
    if (size.size() != 3) throw UsageError("--input-size: expected 3 values C H W");
    config.set_explicit("input_size", size);
  }
  if (auto v = args.get_optional_int("in-chans")) config.set_explicit("in_chans", *v);
  if (auto v = args.get_optional_double("crop-pct")) config.set_explicit("crop_pct", *v);
  if (auto v = args.get_optional_doubles("mean")) config.set_explicit("mean", *v);
  if (auto v = args.get_optional_doubles("std")) config.set_explicit("std", *v);
  if (auto v = args.get_optional("interpolation")) config.set_explicit("interpolation", *v);
  if (auto v = args.get_optional_int("num-classes")) config.set_explicit("num_classes", *v);
  return config;
}

// The mode names a registered crop; create_transform refuses one that is not
// (naming the crops there are), so the core keeps no list of its own.
void apply_crop_mode(const ToolArgs& args, DataConfig& data_config) {
  if (auto mode = args.get_optional("crop-mode")) data_config.crop_mode = *mode;
}

std::string tool_dataset_name(const ToolArgs& args) {
  return default_dataset_name(args.get("dataset"), args.has("data-dir"));
}

std::vector<std::filesystem::path> find_checkpoints(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw UsageError("--checkpoint " + in_quotes(path.string()) + ": no such file");
  if (!std::filesystem::is_directory(path)) return {path};
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors") found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return natural_less(a.filename().string(), b.filename().string()); });
  if (found.empty()) throw UsageError("--checkpoint " + in_quotes(path.string()) + ": no *.safetensors in the folder");
  return found;
}

void load_checkpoint_weights(ClassifierImpl& model, const std::filesystem::path& checkpoint) {
  load_state_dict(model, read_safetensors(checkpoint), /*strict=*/true);
}

CheckpointShape checkpoint_shape(const std::filesystem::path& checkpoint, const std::string& model_name) {
  // A small probe of the architecture tells the tensor names.
  ModelArgs probe_args;
  probe_args.num_classes = 2;
  const PretrainedCfg cfg = create_model(model_name, probe_args)->pretrained_cfg();
  CheckpointShape shape;
  for (const auto& [name, tensor] : read_safetensors(checkpoint)) {
    if (!cfg.classifier.empty() && name == cfg.classifier + ".weight" && tensor.dim() >= 1) {
      shape.num_classes = tensor.size(0);
    }
    if (!cfg.first_conv.empty() && name == cfg.first_conv + ".weight" && tensor.dim() == 4) {
      shape.in_chans = tensor.size(1);
    }
  }
  return shape;
}

std::shared_ptr<Loader> make_eval_loader(std::shared_ptr<const Dataset> dataset, const DataConfig& data_config,
                                         const EvalLoaderOptions& eval) {
  TransformArgs targs = eval_transform_args(data_config);
  targs.crop_border_pixels = eval.crop_border_pixels;
  LoaderOptions options;
  options.batch_size = eval.batch_size;
  options.drop_last = false;
  options.num_workers = eval.workers;
  if (eval.naflex) {
    targs.naflex = eval.naflex;
    options.naflex.push_back(*eval.naflex);
  }
  auto sampler = make_local_sampler(dataset->size(), /*shuffle=*/false, options.seed);
  return std::make_shared<Loader>(std::move(dataset), std::move(sampler), create_transform(targs), options);
}

at::Tensor prepare_eval_images(const Batch& batch, const TransformPipeline& transform, bool channels_last,
                               c10::ScalarType dtype) {
  Rng rng(0);  // eval batch transforms are deterministic
  return prepare_input(batch.images, transform, rng, {.dtype = dtype, .channels_last = channels_last});
}

ModelInput prepare_eval_input(const Batch& batch, const TransformPipeline& transform, const DataConfig& data_config,
                              bool channels_last, c10::ScalarType dtype, bool patchify_channels_last) {
  if (!batch.patches.patches.defined()) return prepare_eval_images(batch, transform, channels_last, dtype);
  return patch_input(
      batch.patches,
      {.mean = data_config.mean, .std = data_config.std, .dtype = dtype, .channels_last = patchify_channels_last});
}

}  // namespace timm
