// timm-logits: writes a model's output logits for a weights file and an input,
// for parity checks against Python timm and for users (docs/models.md).
//
//   timm-logits --model NAME --weights FILE --input PATH --output FILE [options]
//
// The input is a folder of JPEG/PNG images (sorted by file name, each put
// through timm's eval transform for the model's pretrained_cfg: resize, center
// crop, normalise) or a tensor file (.safetensors: the tensor "input" or the
// only one; .npy), an (N, C, H, W) batch used as it is. Logits (N,
// num_classes) go to FILE as safetensors ("logits") or .npy, by its suffix;
// --csv also writes them as text, one row per input. With --features the
// feature maps of timm's forward_intermediates go to FILE instead (tensors
// "features.<level>", .safetensors only). User errors print one line and exit
// 2 (usage) or 1 (runtime).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/data_config.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image.hpp"
#include "timm/data/transform.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/io/npy.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/features.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/tool_args.hpp"

namespace fs = std::filesystem;

namespace {

timm::ToolArgs make_args() {
  timm::ToolArgs args("timm-logits",
                      "Writes the logits of model --model with the weights in --weights for the input --input.\n"
                      "Required: --model, --weights, --input, --output.");
  args.add("model", "", "", "a registered model (timm-run --list-models)");
  args.add("weights", "", "",
           ".safetensors or a torch.save'd .pth / .pth.tar (state_dict or timm training checkpoint; EMA weights "
           "preferred as timm's load_checkpoint)");
  args.add("input", "", "",
           "a folder of JPEG/PNG images (eval transform of the model's pretrained_cfg), or an (N, C, H, W) tensor "
           "file: .safetensors (tensor 'input' or the only one) or .npy, used as it is");
  args.add("output", "", "", ".safetensors (tensor 'logits') or .npy");
  args.add("csv", "", "", "also write the logits as CSV: name (file name or row index), then one column per class");
  args.add("num-classes", "", "", "classifier size (default: the weights file's classifier rows)");
  args.add("in-chans", "", "3", "input channels");
  args.add("batch-size", "", "32", "images per forward");
  args.add_switch("no-ema", "", "take 'state_dict' even when a checkpoint has 'state_dict_ema'");
  args.add_switch("channels-last", "", "run in channels_last memory format");
  args.add("input-key", "", "", "the tensor to read from a .safetensors input (default 'input')");
  args.add_list("plugin-dir", "", "also load plugins from these folders (repeatable)", /*accumulate=*/true);
  args.add_switch("features", "",
                  "write the feature maps of the model's feature levels (timm's forward_intermediates) instead of "
                  "the logits: tensors 'features.<level>' in a .safetensors --output");
  args.add_list("feature-indices", "",
                "with --features, the levels to write (negative counts from the end; default every level)");
  args.add("feature-fmt", "", "NCHW", "with --features, the maps' layout: NCHW, or NLC for a ViT's tokens");
  args.add_switch("feature-norm", "", "with --features, apply the model's final norm where timm's norm=True does");
  return args;
}

struct Options {
  std::string model, weights, input, output, csv, input_key;
  std::optional<int64_t> num_classes;
  int64_t in_chans = 3;
  int64_t batch_size = 32;
  bool use_ema = true;
  bool channels_last = false;
  std::vector<std::string> plugin_dirs;
  std::optional<timm::IntermediatesOptions> features;  // set by --features
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// forward_intermediates' arguments from --features and its flags; nullopt
// without --features, where the feature flags are refused.
std::optional<timm::IntermediatesOptions> feature_options(const timm::ToolArgs& args, const Options& o) {
  if (!args.get_switch("features")) {
    for (const char* flag : {"feature-indices", "feature-fmt", "feature-norm"}) {
      if (args.given(flag)) throw timm::UsageError(std::string("--") + flag + " needs --features");
    }
    return std::nullopt;
  }
  if (!ends_with(o.output, ".safetensors")) {
    throw timm::UsageError("--output " + timm::in_quotes(o.output) +
                           ": --features writes one tensor per level; expected a .safetensors file name");
  }
  if (!o.csv.empty()) throw timm::UsageError("--csv writes logits; it cannot be used with --features");
  timm::IntermediatesOptions features;
  features.intermediates_only(true).output_fmt(args.get("feature-fmt")).norm(args.get_switch("feature-norm"));
  if (const auto indices = args.get_optional_ints("feature-indices")) features.indices(*indices);
  return features;
}

Options options(const timm::ToolArgs& args) {
  Options o;
  o.model = args.get_required("model");
  o.weights = args.get_required("weights");
  o.input = args.get_required("input");
  o.output = args.get_required("output");
  o.csv = args.get("csv");
  o.input_key = args.get("input-key");
  if (args.has("num-classes")) o.num_classes = args.get_int_at_least("num-classes", 1);
  o.in_chans = args.get_int_at_least("in-chans", 1);
  o.batch_size = args.get_int_at_least("batch-size", 1);
  o.use_ema = !args.get_switch("no-ema");
  o.channels_last = args.get_switch("channels-last");
  o.plugin_dirs = args.get_list("plugin-dir");
  if (!ends_with(o.output, ".npy") && !ends_with(o.output, ".safetensors")) {
    throw timm::UsageError("--output " + timm::in_quotes(o.output) + ": expected a .safetensors or .npy file name");
  }
  o.features = feature_options(args, o);
  return o;
}

// The (N, C, H, W) batch of a tensor file.
at::Tensor read_tensor_input(const Options& o) {
  at::Tensor t;
  if (ends_with(o.input, ".npy")) {
    t = timm::read_npy(o.input);
  } else if (ends_with(o.input, ".safetensors")) {
    const timm::NamedTensors all = timm::read_safetensors(o.input);
    const std::string key = o.input_key.empty() ? "input" : o.input_key;
    for (const auto& [name, tensor] : all) {
      if (name == key) t = tensor;
    }
    if (!t.defined() && o.input_key.empty() && all.size() == 1) t = all[0].second;
    if (!t.defined()) {
      throw timm::Error("input " + timm::in_quotes(o.input) + ": no tensor " + timm::in_quotes(key) +
                        " (use --input-key)");
    }
  } else {
    throw timm::UsageError("--input " + timm::in_quotes(o.input) +
                           ": expected a folder of images, a .safetensors or a .npy file");
  }
  if (t.dim() != 4 || t.size(1) != o.in_chans) {
    std::ostringstream shape;
    shape << t.sizes();
    throw timm::Error("input " + timm::in_quotes(o.input) + ": expected an (N, " + std::to_string(o.in_chans) +
                      ", H, W) tensor, got " + shape.str());
  }
  return t.to(at::kFloat);
}

// The image files of a folder, sorted by name.
std::vector<fs::path> image_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && timm::has_image_extension(entry.path().filename().string())) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw timm::Error("input folder " + timm::in_quotes(dir.string()) + ": no .jpg/.jpeg/.png file");
  return files;
}

// timm's eval transform for the model's pretrained_cfg, as create_transform(is_training=False).
timm::TransformPipeline eval_transform(const timm::PretrainedCfg& cfg, int64_t in_chans) {
  timm::DataConfig data;
  data.input_size = {in_chans, cfg.input_size[1], cfg.input_size[2]};
  data.interpolation = cfg.interpolation;
  data.mean = timm::adapt_to_channels(cfg.mean, in_chans);
  data.std = timm::adapt_to_channels(cfg.std, in_chans);
  data.crop_pct = cfg.crop_pct;
  data.crop_mode = cfg.crop_mode;
  return timm::create_transform(timm::eval_transform_args(data));
}

at::Tensor to_chw(const timm::Image& image) {
  const at::Tensor hwc = at::from_blob(const_cast<std::uint8_t*>(image.pixels.data()),
                                       {image.height, image.width, image.channels}, at::kByte);
  return hwc.permute({2, 0, 1}).to(at::kFloat);
}

// The classifier rows in the weights file, when it has a classifier.
std::optional<int64_t> classifier_rows(const timm::NamedTensors& state, const std::string& classifier) {
  for (const auto& [key, tensor] : state) {
    if (key == classifier + ".weight" && tensor.dim() >= 1) return tensor.size(0);
  }
  return std::nullopt;
}

void write_csv(const fs::path& path, const at::Tensor& logits, const std::vector<std::string>& names) {
  std::string text = "name";
  // Appended piece by piece: g++ 12 warns falsely on "," + std::string&&.
  for (int64_t k = 0; k < logits.size(1); ++k) {
    text += ',';
    text += std::to_string(k);
  }
  text += "\n";
  const at::Tensor values = logits.to(at::kDouble).contiguous();
  const double* v = values.data_ptr<double>();
  for (int64_t n = 0; n < logits.size(0); ++n) {
    text += names[static_cast<size_t>(n)];
    for (int64_t k = 0; k < logits.size(1); ++k) {
      text += ',';
      text += timm::python_float_repr(v[n * logits.size(1) + k]);
    }
    text += "\n";
  }
  timm::write_file_atomically(path, text);
}

// Calls `fn` on each --batch-size slice of `input`, in the memory format the
// model runs in.
void for_each_batch(const at::Tensor& input, const Options& o, const std::function<void(const at::Tensor&)>& fn) {
  for (int64_t start = 0; start < input.size(0); start += o.batch_size) {
    const at::Tensor batch = input.slice(0, start, std::min(start + o.batch_size, input.size(0)));
    fn(o.channels_last ? batch.contiguous(at::MemoryFormat::ChannelsLast) : batch.contiguous());
  }
}

// --features: forward_intermediates over `input`, batch by batch, written as
// "features.<level>" (levels as feature_info counts them, in forward order),
// each level's feature_info as metadata ("features.<level>.num_chs",
// ".reduction", ".module").
void write_features(timm::ClassifierImpl& model, const at::Tensor& input, const Options& o) {
  const std::vector<timm::FeatureInfo> info = model.feature_info();
  const int64_t num_levels = static_cast<int64_t>(info.size());
  const std::vector<bool> take =
      timm::take_mask(num_levels, timm::feature_take_indices(num_levels, o.features->indices()).first);
  std::vector<int64_t> levels;  // forward order, as forward_intermediates returns them
  for (int64_t level = 0; level < num_levels; ++level) {
    if (take[static_cast<size_t>(level)]) levels.push_back(level);
  }
  std::vector<std::vector<at::Tensor>> chunks(levels.size());
  for_each_batch(input, o, [&](const at::Tensor& batch) {
    const timm::Intermediates out = model.forward_intermediates(batch, *o.features);
    if (out.intermediates.size() != levels.size()) {
      throw timm::Error("model " + timm::in_quotes(o.model) + ": forward_intermediates returned " +
                        std::to_string(out.intermediates.size()) + " feature maps for " +
                        std::to_string(levels.size()) + " levels");
    }
    for (size_t i = 0; i < levels.size(); ++i) chunks[i].push_back(out.intermediates[i]);
  });
  timm::NamedTensors tensors;
  std::map<std::string, std::string> metadata = {{"model", o.model}, {"weights", o.weights}, {"input", o.input}};
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string key = "features." + std::to_string(levels[i]);
    tensors.emplace_back(key, at::cat(chunks[i]).contiguous());
    const timm::FeatureInfo& f = info[static_cast<size_t>(levels[i])];
    metadata[key + ".num_chs"] = std::to_string(f.num_chs);
    metadata[key + ".reduction"] = std::to_string(f.reduction);
    metadata[key + ".module"] = f.module;
  }
  timm::write_safetensors(o.output, tensors, metadata);
  timm::log_info(timm::format("%s: feature maps of %zu levels for %s written to %s", o.model.c_str(), levels.size(),
                              o.input.c_str(), o.output.c_str()));
}

int run(int argc, char** argv) {
  timm::ToolArgs tool_args = make_args();
  if (!tool_args.parse_or_print_help(argc, argv)) return 0;
  const Options o = options(tool_args);
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(o.plugin_dirs));

  const timm::NamedTensors state = timm::load_state_dict_file(o.weights, o.use_ema);
  timm::ModelArgs args;
  args.in_chans = o.in_chans;
  args.num_classes = o.num_classes.value_or(1000);
  timm::ModelPtr model = timm::create_model(o.model, args);
  if (!o.num_classes) {
    const auto rows = classifier_rows(state, model->pretrained_cfg().classifier);
    if (rows && *rows != args.num_classes) {
      args.num_classes = *rows;
      model = timm::create_model(o.model, args);
    }
  }
  try {
    timm::load_state_dict(*model, state, /*strict=*/true);
  } catch (const timm::Error& e) {
    throw timm::Error("weights file " + timm::in_quotes(o.weights) + ": " + e.what());
  }
  model->eval();
  if (o.channels_last) timm::to_channels_last(*model);

  at::Tensor input;
  std::vector<std::string> names;
  if (fs::is_directory(o.input)) {
    const timm::TransformPipeline transform = eval_transform(model->pretrained_cfg(), o.in_chans);
    timm::Rng rng(0);  // the eval transform draws nothing; the interface wants one
    std::vector<at::Tensor> images;
    for (const auto& file : image_files(o.input)) {
      timm::Image image = timm::read_image(file, o.in_chans);
      transform.apply(image, rng);
      images.push_back(to_chw(image));
      names.push_back(file.filename().string());
    }
    input = at::stack(images);
    transform.apply(input, rng);  // normalise, as the batch stage on the device
  } else {
    input = read_tensor_input(o);
    for (int64_t n = 0; n < input.size(0); ++n) names.push_back(std::to_string(n));
  }

  c10::NoGradGuard no_grad;
  if (o.features) {
    write_features(*model, input, o);
    return 0;
  }
  std::vector<at::Tensor> chunks;
  for_each_batch(input, o, [&](const at::Tensor& batch) { chunks.push_back(model->forward(batch)); });
  const at::Tensor logits = at::cat(chunks).contiguous();

  if (ends_with(o.output, ".npy")) {
    timm::write_npy(o.output, logits);
  } else {
    timm::write_safetensors(o.output, {{"logits", logits}},
                            {{"model", o.model}, {"weights", o.weights}, {"input", o.input}});
  }
  if (!o.csv.empty()) write_csv(o.csv, logits, names);
  timm::log_info(timm::format("%s: logits (%lld, %lld) for %s written to %s", o.model.c_str(),
                              static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)),
                              o.input.c_str(), o.output.c_str()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-logits", argc, argv, run); }
