// timm-infer: the top-k classes and their probabilities (or logits) for each
// image of a folder or of the Fashion-MNIST test set, as timm's inference.py.
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/data/dataset.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/eval_setup.hpp"
#include "timm/tools/imagenet_info.hpp"
#include "timm/tools/progress.hpp"
#include "timm/tools/results_file.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/metrics.hpp"

namespace {

// Fashion-MNIST's class names: (name, description) by index.
const std::vector<std::pair<std::string, std::string>> kFashionMnistLabels = {{"t_shirt_top", "T-shirt/top"},
                                                                              {"trouser", "Trouser"},
                                                                              {"pullover", "Pullover"},
                                                                              {"dress", "Dress"},
                                                                              {"coat", "Coat"},
                                                                              {"sandal", "Sandal"},
                                                                              {"shirt", "Shirt"},
                                                                              {"sneaker", "Sneaker"},
                                                                              {"bag", "Bag"},
                                                                              {"ankle_boot", "Ankle boot"}};

// inference.py's labels by --label-type (name, description, detail or
// detailed): Fashion-MNIST's for its 10 classes; ImageNet-1k's (timm's
// ImageNetInfo) for 1000 outputs, as inference.py's infer_imagenet_subset;
// none otherwise (inference.py logs that it cannot deduce the subset), an
// error when --label-type asked for them.
std::vector<std::string> class_labels(const timm::ToolArgs& args, bool fashion_mnist, int64_t num_classes) {
  const std::string type = args.get("label-type");
  if (type != "none" && type != "name" && type != "description" && type != "detail" && type != "detailed") {
    throw timm::UsageError("--label-type " + timm::in_quotes(type) +
                           ": expected none, name, description, detail or detailed");
  }
  std::vector<std::string> labels;
  if (type == "none") return labels;
  if (fashion_mnist) {
    for (const auto& [name, description] : kFashionMnistLabels) labels.push_back(type == "name" ? name : description);
  } else if (num_classes == 1000) {
    for (const timm::ClassLabel& label : timm::imagenet1k_labels()) {
      labels.push_back(type == "name"          ? label.name
                       : type == "description" ? label.description
                                               : label.detailed_description());
    }
  } else if (args.given("label-type")) {
    throw timm::UsageError("--label-type " + type + ": class names are known for Fashion-MNIST (10 classes) and " +
                           "ImageNet-1k (1000), not for " + std::to_string(num_classes) +
                           " classes; use --label-type none");
  }
  return labels;
}

timm::ToolArgs make_args() {
  timm::ToolArgs args("timm-infer", "Top-k predictions per image of a folder or dataset (timm's inference.py).");
  timm::add_model_data_flags(args, "resnet18");
  timm::add_dataset_flags(args, 256, 2);
  timm::add_eval_model_flags(args);
  args.add("checkpoint", "", "", "a .safetensors checkpoint written by timm-run");
  args.add("topk", "", "5", "top-k to output");
  args.add("output-type", "", "prob", "prob (softmax) or logit");
  args.add("label-type", "", "description",
           "none, name, description, detail or detailed (Fashion-MNIST's class names; ImageNet-1k's for 1000 outputs)");
  args.add_switch("include-index", "", "include the class index column");
  args.add_switch("fullname", "", "use the full sample path (or name) as filename, not the basename");
  args.add_switch("results-separate-col", "", "one column per rank (index_0, prob_0, ...) instead of lists");
  args.add("results-file", "", "", "output CSV or JSON file");
  args.add("results-format", "", "", "csv or json (default: from the file's extension)");
  args.add_list("plugin-dir", "", "extra folders to load plugins from (repeatable)", /*accumulate=*/true);
  timm::add_runtime_flags(args, /*num_gpu=*/true);
  args.add("results-dir", "", "", "folder for the results file (created; the file defaults to <model>-<img size>.csv)");
  args.add("filename-col", "", "filename", "name for the filename / sample name column");
  args.add("index-col", "", "index", "name for the output indices column(s)");
  args.add("label-col", "", "label", "name for the output labels column(s)");
  args.add("output-col", "", "", "name for the logit / prob column(s) (default: prob or logit)");
  args.add_switch("exclude-output", "",
                  "exclude logits/probs from the results, just the indices (and labels); inference.py parses it and "
                  "ignores it");
  args.add_switch("no-console-results", "", "do not print the results to the console");
  timm::add_test_pool_flag(args);
  return args;
}

std::string sample_filename(const timm::Dataset& dataset, std::size_t index, bool fullname) {
  const std::string name = dataset.describe(index);
  return fullname ? name : std::filesystem::path(name).filename().string();
}

template <class T>
void add_ranked(timm::ResultRow& row, const std::string& column, const std::vector<T>& values, bool separate) {
  if (!separate) {
    row.emplace_back(column, values);
    return;
  }
  for (std::size_t k = 0; k < values.size(); ++k) row.emplace_back(column + "_" + std::to_string(k), values[k]);
}

struct Options {
  int64_t topk;
  bool prob, include_index, fullname, separate, exclude_output;
  std::string filename_col, index_col, label_col, output_col;
  std::vector<std::string> labels;  // each class's label; empty: no label column
  timm::EvalPrecision precision;
};

std::vector<timm::ResultRow> predict(timm::ClassifierImpl& model, timm::Loader& loader, const timm::Dataset& dataset,
                                     const Options& opt, int64_t log_freq) {
  model.eval();
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  const auto num_batches = static_cast<int64_t>(loader.num_batches());
  timm::Progress progress("Predict", num_batches, log_freq);
  timm::AverageMeter batch_time;
  std::vector<timm::ResultRow> rows;
  timm::Stopwatch batch_watch;
  int64_t index = 0;
  while (auto batch = loader.next()) {
    const at::Tensor input =
        timm::prepare_eval_images(*batch, loader.transform(), opt.precision.channels_last, opt.precision.model_dtype);
    at::Tensor output;
    {
      // inference.py: the forward alone under autocast; softmax and top-k in
      // the output's dtype, the values then as float32.
      std::optional<timm::AutocastGuard> autocast;
      if (opt.precision.amp_dtype) autocast.emplace(at::kCPU, *opt.precision.amp_dtype);
      output = model.forward(input);
    }
    if (opt.prob) output = at::softmax(output, -1);
    const auto [values, indices] = at::topk(output, std::min<int64_t>(opt.topk, output.size(1)));
    const auto v = values.to(at::kFloat).contiguous();
    const auto ix = indices.contiguous();
    for (int64_t r = 0; r < v.size(0); ++r) {
      const auto sample = rows.size();
      std::vector<double> out(v[r].data_ptr<float>(), v[r].data_ptr<float>() + v.size(1));
      std::vector<int64_t> idx(ix[r].data_ptr<int64_t>(), ix[r].data_ptr<int64_t>() + ix.size(1));
      timm::ResultRow row{{opt.filename_col, sample_filename(dataset, sample, opt.fullname)}};
      if (opt.include_index || opt.exclude_output) add_ranked(row, opt.index_col, idx, opt.separate);
      if (!opt.labels.empty()) {
        std::vector<std::string> names;
        for (int64_t i : idx) {
          const bool known = i >= 0 && static_cast<std::size_t>(i) < opt.labels.size();
          names.push_back(known ? opt.labels[static_cast<std::size_t>(i)] : "<unmapped:" + std::to_string(i) + ">");
        }
        add_ranked(row, opt.label_col, names, opt.separate);
      }
      if (!opt.exclude_output) add_ranked(row, opt.output_col, out, opt.separate);
      rows.push_back(std::move(row));
    }
    batch_time.update(batch_watch.lap());
    progress.step(index, timm::format("%zu images", rows.size()),
                  timm::format("Predict: [%lld/%lld] Time %.3f (%.3f)", static_cast<long long>(index),
                               static_cast<long long>(num_batches), batch_time.val(), batch_time.avg()));
    ++index;
  }
  progress.finish();
  return rows;
}

Options make_options(const timm::ToolArgs& args, const std::string& dataset_name, int64_t num_classes,
                     const timm::EvalPrecision& precision) {
  Options opt{args.get_int("topk"),
              true,
              args.get_switch("include-index"),
              args.get_switch("fullname"),
              args.get_switch("results-separate-col"),
              args.get_switch("exclude-output"),
              args.get("filename-col"),
              args.get("index-col"),
              args.get("label-col"),
              "",
              {},
              precision};
  if (opt.topk <= 0) throw timm::UsageError("--topk " + std::to_string(opt.topk) + ": expected a positive integer");
  const std::string output_type = args.get("output-type");
  if (output_type != "prob" && output_type != "logit") {
    throw timm::UsageError("--output-type " + timm::in_quotes(output_type) + ": expected prob or logit");
  }
  opt.prob = output_type == "prob";
  opt.output_col = args.has("output-col") ? args.get("output-col") : output_type;
  opt.labels = class_labels(args, timm::is_fashion_mnist(dataset_name) && num_classes == 10, num_classes);
  return opt;
}

// The results file: --results-file, in --results-dir when given (created;
// inference.py's default name there: <model>-<img size>.csv); none without
// either.
std::optional<std::filesystem::path> results_path(const timm::ToolArgs& args, const timm::DataConfig& data_config) {
  if (!args.has("results-dir")) {
    if (!args.has("results-file")) return std::nullopt;
    return std::filesystem::path(args.get("results-file"));
  }
  const std::filesystem::path dir = args.get("results-dir");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw timm::UsageError("--results-dir " + timm::in_quotes(dir.string()) + ": " + ec.message());
  if (args.has("results-file")) return dir / args.get("results-file");
  return dir / (args.get("model") + "-" + std::to_string(data_config.input_size.at(1)) + ".csv");
}

int run(int argc, char** argv) {
  timm::ToolArgs args = make_args();
  if (!args.parse_or_print_help(argc, argv)) return 0;
  timm::check_runtime_flags(args);
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(args.get_list("plugin-dir")));
  // The precision flags' errors before any data or weights are read.
  const timm::EvalPrecision precision = timm::eval_precision(args);
  const std::string dataset_name = timm::tool_dataset_name(args);
  const timm::DatasetDefaults defaults = timm::dataset_defaults(dataset_name);
  timm::Config config = timm::data_flags_config(args);
  const std::string model_name = args.get("model");
  const bool pretrained = !args.has("checkpoint") && args.get_switch("pretrained");
  timm::CheckpointShape shape;
  if (args.has("checkpoint")) shape = timm::checkpoint_shape(args.get("checkpoint"), model_name);
  // The channels the checkpoint was trained with, unless --in-chans says.
  int64_t in_chans = timm::resolve_in_chans(config, defaults);
  if (shape.in_chans && !args.given("in-chans") && !args.given("input-size")) in_chans = *shape.in_chans;
  config.set("in_chans", in_chans);
  // A flat folder of images is its own split; otherwise timm's split search.
  auto dataset = timm::first_samples(
      timm::create_dataset(dataset_name, args.get("data-dir"), args.get("split"), in_chans, args.get("class-map")),
      args.get_optional_int("num-samples"), "num-samples");

  timm::ModelArgs model_args;
  model_args.in_chans = in_chans;
  model_args.global_pool = args.get_optional("gp");
  model_args.kwargs = args.get_kwargs("model-kwargs");
  // inference.py: --pretrained without --num-classes keeps the pretrained head.
  const int64_t default_classes =
      pretrained ? timm::pretrained_num_classes(model_name) : (dataset_name.empty() ? 1000 : 10);
  model_args.num_classes = args.get_optional_int("num-classes").value_or(default_classes);
  if (shape.num_classes && !args.given("num-classes")) model_args.num_classes = *shape.num_classes;
  timm::ModelPtr model = timm::create_model(model_name, model_args);
  if (args.has("checkpoint")) {
    timm::load_checkpoint_weights(*model, args.get("checkpoint"));
    if (args.get_switch("pretrained")) {
      timm::log_info(
          "--pretrained with --checkpoint: predicting with the checkpoint's weights (they replace the "
          "pretrained ones, as in inference.py)");
    }
  } else if (pretrained) {
    timm::load_hub_pretrained(*model, model_name, in_chans, model_args.num_classes);
  } else {
    timm::log_warning(
        "no --checkpoint: predicting with randomly initialised weights (--pretrained: the model's default weights)");
  }
  timm::log_info(timm::format("Model %s created, param count: %lld", model_name.c_str(),
                              static_cast<long long>(timm::count_parameters(*model))));
  // inference.py: the train size and crop (its --use-train-size changes nothing).
  timm::DataConfig data_config = timm::resolve_data_config(config, model->pretrained_cfg(), defaults);
  timm::apply_crop_mode(args, data_config);
  for (const auto& line : timm::describe_data_config(data_config)) timm::log_info(line);
  model = timm::test_pool_if_asked(args, std::move(model), model_name, data_config);

  const Options options = make_options(args, dataset_name, model_args.num_classes, precision);
  timm::log_info(timm::describe_eval_precision(options.precision, "Running inference"));
  // inference.py: model.to(device=device, dtype=model_dtype), then channels_last.
  timm::to_model_dtype(*model, options.precision.model_dtype);
  if (options.precision.channels_last) timm::to_channels_last(*model);
  auto loader = timm::make_eval_loader(dataset, data_config,
                                       {.batch_size = args.get_int("batch-size"),
                                        .workers = args.get_int("workers"),
                                        .naflex = std::nullopt,
                                        .crop_border_pixels = 0});
  const auto rows = predict(*model, *loader, *dataset, options, std::max<int64_t>(1, args.get_int("log-freq")));
  if (const auto file = results_path(args, data_config)) {
    timm::write_results_file(*file, rows, args.get("results-format"));
    timm::log_info("Wrote " + std::to_string(rows.size()) + " predictions to " + file->string());
  }
  // inference.py prints them unless --no-console-results, a file written or not.
  if (!args.get_switch("no-console-results"))
    std::cout << "--result\n" << timm::format_results(rows, "json") << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-infer", argc, argv, run); }
