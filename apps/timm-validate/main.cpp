// timm-validate: evaluates a model (one checkpoint or a folder of them) on a
// dataset the way timm's validate.py does: top-1, top-5, loss, throughput,
// results as CSV or JSON.
//
// Metrics are exact: the loss and the hits are summed over samples and divided
// once, so the numbers equal timm-run's eval of the same weights and data.
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>

#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/load_weights.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/batch_retry.hpp"
#include "timm/tools/classification_scores.hpp"
#include "timm/tools/eval_setup.hpp"
#include "timm/tools/progress.hpp"
#include "timm/tools/real_labels.hpp"
#include "timm/tools/results_file.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/checkpoint.hpp"
#include "timm/train/metrics.hpp"

namespace {

timm::ToolArgs make_args() {
  timm::ToolArgs args("timm-validate", "Validates timm-cpp checkpoints on a dataset (timm's validate.py).");
  timm::add_model_data_flags(args, "resnet18");
  timm::add_dataset_flags(args, 256, 4);
  timm::add_eval_model_flags(args);
  timm::add_reparam_flag(args);
  args.add("checkpoint", "", "", "a .safetensors checkpoint, or a folder: validate each *.safetensors in it");
  args.add("results-file", "", "", "output CSV or JSON file for validation results");
  args.add("results-format", "", "", "csv or json (default: from the file's extension)");
  args.add_list("plugin-dir", "", "extra folders to load plugins from (repeatable)", /*accumulate=*/true);
  args.add_switch("naflex-loader", "", "Use NaFlex loader (Requires NaFlex compatible model)");
  args.add("naflex-max-seq-len", "", "576", "Fixed maximum sequence length for NaFlex loader (validation)");
  args.add("input-img-mode", "", "", "dataset image mode: RGB or L (default: from the input channels)");
  args.add("input-key", "", "", "dataset key for input images (wds/ datasets)");
  args.add("target-key", "", "", "dataset key for target labels (wds/ datasets)");
  args.add("valid-labels", "", "",
           "valid label indices txt file (one per line) for validation of a partial label space: the model's "
           "outputs at those indices, in that order, are scored against the dataset's labels");
  args.add("seed", "", "42", "random seed (of the weights of a model without a checkpoint, and the warm-up's input)");
  args.add_switch("no-prefetcher", "", "accepted: batches are normalised once, in the loader's last step, either way");
  args.add_switch("pin-mem", "",
                  "accepted: pinned memory only speeds host-to-GPU copies, and the tools run on the CPU");
  timm::add_runtime_flags(args, /*num_gpu=*/true);
  for (const std::string flag : {"dataset-download", "dataset-trust-remote-code"}) {
    args.add_refused(flag, timm::find_flag(flag)->unsupported);
  }
  args.add_refused("tf-preprocessing", "it is TensorFlow's preprocessing pipeline (Python TensorFlow)");
  args.add_switch("use-ema", "",
                  "validate the checkpoint's EMA weights (timm-run --model-ema) where it has them, else its weights");
  args.add("real-labels", "", "",
           "real labels JSON file for ImageNet evaluation (the reassessed labels of 'Are we done with ImageNet?'): "
           "top-1 / top-5 over the images that have them");
  args.add("crop-border-pixels", "", "0", "crop pixels from the image border before the eval crop (timm's TrimBorder)");
  timm::add_test_pool_flag(args);
  args.add("metrics-avg", "", "",
           "precision, recall and F1-score of the top-1 predictions, averaged micro, macro or weighted "
           "(scikit-learn's, zero_division=0)");
  args.add_switch("retry", "",
                  "after an out-of-memory error, validate again with a smaller batch (timm's decay_batch_step), "
                  "down to 1; a folder of checkpoints always retries, as validate.py's bulk runs");
  return args;
}

struct Outcome {
  double loss = 0.0;
  double top1 = 0.0;
  double top5 = 0.0;
  int64_t samples = 0;
  at::Tensor predictions;  // top-1 class per sample, for --metrics-avg
  at::Tensor targets;
};

Outcome validate(timm::ClassifierImpl& model, timm::Loader& loader, const timm::DataConfig& data_config,
                 const timm::EvalPrecision& precision, const at::Tensor& valid_labels, timm::RealLabels* real_labels,
                 int64_t log_freq) {
  model.eval();
  torch::NoGradGuard no_grad;
  loader.start_epoch(0);
  const auto num_batches = static_cast<int64_t>(loader.num_batches());
  timm::Progress progress("Test", num_batches, log_freq);
  double loss_sum = 0.0;
  int64_t top1 = 0, top5 = 0, samples = 0;
  std::vector<at::Tensor> predictions, targets;
  timm::AverageMeter batch_time;
  timm::Stopwatch batch_watch;
  int64_t index = 0;
  while (auto batch = loader.next()) {
    const timm::ModelInput input =
        timm::prepare_eval_input(*batch, loader.transform(), data_config, precision.channels_last,
                                 precision.model_dtype, model.patchify_channels_last());
    at::Tensor output, loss_tensor;
    {
      // validate.py: the forward and the loss under autocast. The loss and
      // the hits from float32 logits, as timm-run's eval: autocast computes
      // the cross-entropy in float32 anyway; a --model-dtype model's logits
      // are scored exactly (validate.py: in that dtype).
      std::optional<timm::AutocastGuard> autocast;
      if (precision.amp_dtype) autocast.emplace(at::kCPU, *precision.amp_dtype);
      output = timm::forward_input(model, input).to(at::kFloat);
      if (valid_labels.defined()) output = output.index_select(1, valid_labels);
      loss_tensor = at::cross_entropy_loss(output, batch->targets);
    }
    if (real_labels != nullptr) real_labels->add_result(output);
    predictions.push_back(output.argmax(1));
    targets.push_back(batch->targets);
    const double loss = loss_tensor.item<double>();
    const auto correct = timm::correct_topk(output, batch->targets, {1, 5});
    const int64_t n = input.batch_size();
    loss_sum += loss * static_cast<double>(n);
    top1 += correct[0];
    top5 += correct[1];
    samples += n;
    batch_time.update(batch_watch.lap());
    const double avg_top1 = 100.0 * top1 / samples;
    progress.step(
        index, timm::format("Loss %.4f  Acc@1 %.3f  Acc@5 %.3f", loss_sum / samples, avg_top1, 100.0 * top5 / samples),
        timm::format("Test: [%4lld/%lld]  Time: %.3fs (%.3fs, %7.2f/s)  Loss: %7.4f (%6.4f)  "
                     "Acc@1: %7.3f (%7.3f)  Acc@5: %7.3f (%7.3f)",
                     static_cast<long long>(index), static_cast<long long>(num_batches), batch_time.val(),
                     batch_time.avg(), n / batch_time.avg(), loss, loss_sum / samples, 100.0 * correct[0] / n, avg_top1,
                     100.0 * correct[1] / n, 100.0 * top5 / samples));
    ++index;
  }
  progress.finish();
  if (samples == 0) throw timm::Error("the dataset produced no sample");
  Outcome outcome{loss_sum / samples,   100.0 * top1 / samples, 100.0 * top5 / samples, samples,
                  at::cat(predictions), at::cat(targets)};
  // validate.py: real labels replace the top-k values at the end.
  if (real_labels != nullptr) {
    outcome.top1 = real_labels->accuracy(1);
    outcome.top5 = real_labels->accuracy(5);
  }
  return outcome;
}

// validate.py's --naflex-loader: NaFlex batches cut by the model's patch
// size, padded to --naflex-max-seq-len. validate.py falls back to 16x16
// patches for a model without one and fails at its first forward; refused
// here, naming the model.
std::optional<timm::NaFlexTransformArgs> naflex_args(const timm::ToolArgs& args, const timm::ClassifierImpl& model) {
  if (!args.get_switch("naflex-loader")) {
    if (args.given("naflex-max-seq-len"))
      throw timm::UsageError("--naflex-max-seq-len: only used with --naflex-loader");
    return std::nullopt;
  }
  const auto patch = model.patch_size();
  if (!patch) {
    throw timm::UsageError("--naflex-loader: " + timm::describe_model(model) +
                           " takes images only, not patches (NaFlex batches need a model that takes patches, such as "
                           "naflexvit_*)");
  }
  return timm::NaFlexTransformArgs{*patch, args.get_int_at_least("naflex-max-seq-len", 1)};
}

// validate.py's --valid-labels: the class indices (one integer per line)
// whose outputs are scored, the dataset's label i naming valid_labels[i].
// Each must be a class of the model, and the dataset's labels must each
// have one; throws UsageError naming the file and what is wrong.
at::Tensor read_valid_labels(const std::filesystem::path& file, int64_t num_classes, int64_t dataset_classes) {
  std::ifstream in(file);
  if (!in) throw timm::UsageError("--valid-labels " + timm::in_quotes(file.string()) + ": cannot open the file");
  std::vector<int64_t> labels;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string where = "--valid-labels " + timm::in_quotes(file.string()) + ", line " + std::to_string(number);
    std::size_t used = 0;
    int64_t label = -1;
    try {
      label = std::stoll(line, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || line.find_first_not_of(" \t\r", used) != std::string::npos) {
      throw timm::UsageError(where + ": expected a class index, got '" + line + "'");
    }
    if (label < 0 || label >= num_classes) {
      throw timm::UsageError(where + ": class " + std::to_string(label) + " is not one of the model's " +
                             std::to_string(num_classes));
    }
    labels.push_back(label);
  }
  if (static_cast<int64_t>(labels.size()) < dataset_classes) {
    throw timm::UsageError("--valid-labels " + timm::in_quotes(file.string()) + ": " + std::to_string(labels.size()) +
                           " labels for a dataset of " + std::to_string(dataset_classes) + " classes");
  }
  return at::tensor(labels, at::kLong);
}

// validate.py's load_checkpoint(model, checkpoint, use_ema): the EMA weights
// with --use-ema where the checkpoint holds them; its weights otherwise
// (timm falls back without a word; we say so).
void load_weights(const timm::ToolArgs& args, timm::ClassifierImpl& model, const std::filesystem::path& checkpoint) {
  if (args.get_switch("use-ema")) {
    if (timm::load_ema_weights(model, checkpoint)) {
      timm::log_info("Loaded state_dict_ema from checkpoint '" + checkpoint.string() + "'");
      return;
    }
    timm::log_warning("--use-ema: " + checkpoint.string() +
                      " holds no EMA weights (a run without --model-ema); validating its weights");
  }
  timm::load_checkpoint_weights(model, checkpoint);
  timm::log_info("Loaded state_dict from checkpoint '" + checkpoint.string() + "'");
}

std::vector<std::string> sample_filenames(const timm::Dataset& dataset) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < dataset.size(); ++i) names.push_back(dataset.describe(i));
  return names;
}

void warm_up(timm::ClassifierImpl& model, const timm::DataConfig& data_config, int64_t batch_size,
             const timm::EvalPrecision& precision) {
  torch::NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> shape{batch_size};
  shape.insert(shape.end(), data_config.input_size.begin(), data_config.input_size.end());
  at::Tensor input = at::randn(shape).to(precision.model_dtype);
  if (precision.channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
  std::optional<timm::AutocastGuard> autocast;
  if (precision.amp_dtype) autocast.emplace(at::kCPU, *precision.amp_dtype);
  model.forward(input);
}

double round_to(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

// One validation of validate.py's model_cfgs: a model, and a checkpoint or
// (with `pretrained`) its default pretrained weights.
struct Job {
  std::string model;
  std::optional<std::filesystem::path> checkpoint;
  bool pretrained = false;
};

// validate.py's bulk runs: each checkpoint of a --checkpoint folder; the
// registered models a --model wildcard matches, or "all" of them, with their
// pretrained weights; the model names in a --model file, one per line.
// Empty for a single validation.
std::vector<Job> bulk_jobs(const timm::ToolArgs& args) {
  const std::string model = args.get("model");
  const bool pretrained = args.get_switch("pretrained");
  std::vector<Job> jobs;
  if (args.has("checkpoint")) {
    if (!std::filesystem::is_directory(args.get("checkpoint"))) return jobs;
    for (const auto& path : timm::find_checkpoints(args.get("checkpoint"))) jobs.push_back({model, path, false});
    return jobs;
  }
  const timm::Registry& registry = timm::Registry::global();
  if (registry.find(timm::PluginKind::kModel, model) != nullptr) return jobs;
  if (model == "all" || model.find_first_of("*?[") != std::string::npos) {
    for (const auto& name : timm::models_matching("model", model == "all" ? "*" : model)) {
      jobs.push_back({name, std::nullopt, true});
    }
  } else if (std::filesystem::is_regular_file(model)) {
    for (const auto& name : timm::read_model_names("model", model)) jobs.push_back({name, std::nullopt, pretrained});
  }
  return jobs;
}

timm::ResultRow validate_one(const timm::ToolArgs& args, const Job& job, std::shared_ptr<const timm::Dataset> dataset,
                             const timm::DatasetDefaults& defaults, int64_t in_chans,
                             const timm::EvalPrecision& precision, int64_t batch_size) {
  const std::string& model_name = job.model;
  const std::optional<std::filesystem::path>& checkpoint = job.checkpoint;
  // validate.py's random_seed, before the model is made: each of a bulk run's validations as a single one.
  at::manual_seed(static_cast<uint64_t>(args.get_int("seed")));
  timm::Config config = timm::data_flags_config(args);
  config.set("in_chans", in_chans);
  timm::ModelArgs model_args;
  model_args.in_chans = in_chans;
  model_args.global_pool = args.get_optional("gp");
  model_args.kwargs = args.get_kwargs("model-kwargs");
  // validate.py: --pretrained without --num-classes keeps the pretrained head.
  const bool pretrained = !checkpoint && job.pretrained;
  model_args.num_classes = pretrained ? timm::pretrained_num_classes(model_name) : dataset->num_classes();
  if (auto n = args.get_optional_int("num-classes")) model_args.num_classes = *n;
  if (checkpoint && !args.given("num-classes")) {
    // The head size the checkpoint was trained with, as timm-run wrote it.
    if (auto n = timm::checkpoint_shape(*checkpoint, model_name).num_classes) model_args.num_classes = *n;
  }
  timm::ModelPtr model = timm::create_model(model_name, model_args);
  if (checkpoint) {
    load_weights(args, *model, *checkpoint);
  } else if (pretrained) {
    timm::load_hub_pretrained(*model, model_name, in_chans, model_args.num_classes);
  } else {
    timm::log_warning(
        "no --checkpoint: validating randomly initialised weights (--pretrained: the model's default weights)");
  }
  timm::reparameterize_if_asked(args, *model);
  const int64_t param_count = timm::count_parameters(*model);
  timm::log_info(
      timm::format("Model %s created, param count: %lld", model_name.c_str(), static_cast<long long>(param_count)));
  timm::DataConfig data_config = timm::resolve_data_config(config, model->pretrained_cfg(), defaults,
                                                           /*use_test_size=*/!args.get_switch("use-train-size"));
  timm::apply_crop_mode(args, data_config);
  for (const auto& line : timm::describe_data_config(data_config)) timm::log_info(line);
  model = timm::test_pool_if_asked(args, std::move(model), model_name, data_config);
  // validate.py: model.to(device=device, dtype=model_dtype), then channels_last.
  timm::to_model_dtype(*model, precision.model_dtype);
  if (precision.channels_last) timm::to_channels_last(*model);

  const std::optional<timm::NaFlexTransformArgs> naflex = naflex_args(args, *model);
  auto loader = timm::make_eval_loader(dataset, data_config,
                                       {.batch_size = batch_size,
                                        .workers = args.get_int("workers"),
                                        .naflex = naflex,
                                        .crop_border_pixels = args.get_int("crop-border-pixels")});
  // validate.py's warm-up forward on random images of the input size; not
  // with NaFlex batches, whose images have their own sizes (validate.py warms
  // up on the input size there too, which a NaFlexVit refuses unless it is a
  // multiple of the patch).
  if (!naflex) warm_up(*model, data_config, batch_size, precision);
  const at::Tensor valid_labels =
      args.has("valid-labels")
          ? read_valid_labels(args.get("valid-labels"), model->num_classes(), dataset->num_classes())
          : at::Tensor();
  std::optional<timm::RealLabels> real_labels;
  if (args.has("real-labels")) real_labels.emplace(args.get("real-labels"), sample_filenames(*dataset));
  const Outcome outcome =
      validate(*model, *loader, data_config, precision, valid_labels, real_labels ? &*real_labels : nullptr,
               std::max<int64_t>(1, args.get_int("log-freq")));
  std::string summary = timm::format(" * Acc@1 %.3f (%.3f) Acc@5 %.3f (%.3f)", outcome.top1, 100.0 - outcome.top1,
                                     outcome.top5, 100.0 - outcome.top5);
  timm::ResultRow scores;
  if (const auto average = args.get_optional("metrics-avg")) {
    const timm::ClassificationScores s = timm::classification_scores(outcome.targets, outcome.predictions, *average);
    scores = {{*average + "_precision", round_to(100.0 * s.precision, 4)},
              {*average + "_recall", round_to(100.0 * s.recall, 4)},
              {*average + "_f1_score", round_to(100.0 * s.f1, 4)}};
    summary += timm::format(" | Precision(%s) %.3f | Recall(%s) %.3f | F1-score(%s) %.3f", average->c_str(),
                            100.0 * s.precision, average->c_str(), 100.0 * s.recall, average->c_str(), 100.0 * s.f1);
  }
  timm::log_info(summary);
  timm::log_info(timm::format(" * Loss %.4f over %lld images", outcome.loss, static_cast<long long>(outcome.samples)));
  timm::ResultRow row{{"model", model_name},
                      {"top1", round_to(outcome.top1, 4)},
                      {"top1_err", round_to(100.0 - outcome.top1, 4)},
                      {"top5", round_to(outcome.top5, 4)},
                      {"top5_err", round_to(100.0 - outcome.top5, 4)},
                      {"loss", outcome.loss}};
  row.insert(row.end(), scores.begin(), scores.end());  // validate.py: after the top-k
  row.insert(row.end(), {{"param_count", round_to(param_count / 1e6, 2)},
                         {"img_size", data_config.input_size.back()},
                         {"crop_pct", data_config.crop_pct},
                         {"interpolation", data_config.interpolation}});
  if (checkpoint) row.emplace_back("checkpoint", checkpoint->string());
  return row;
}

double top1_of(const timm::ResultRow& row) { return std::get<double>(row[1].second); }

int run(int argc, char** argv) {
  timm::ToolArgs args = make_args();
  if (!args.parse_or_print_help(argc, argv)) return 0;
  timm::check_runtime_flags(args);
  if (const auto average = args.get_optional("metrics-avg")) timm::check_metrics_average(*average);
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(args.get_list("plugin-dir")));
  const timm::EvalPrecision precision = timm::eval_precision(args);
  timm::log_info(timm::describe_eval_precision(precision, "Validating"));
  if (args.get_switch("pretrained") && args.has("checkpoint")) {
    timm::log_info(
        "--pretrained with --checkpoint: the checkpoint's weights are validated (they replace the "
        "pretrained ones, as in validate.py)");
  }
  const std::string dataset_name = timm::tool_dataset_name(args);
  const timm::DatasetDefaults defaults = timm::dataset_defaults(dataset_name);
  std::vector<Job> jobs = bulk_jobs(args);
  const bool bulk = !jobs.empty();
  if (bulk) {
    std::vector<std::string> names;
    for (const Job& job : jobs) names.push_back(job.checkpoint ? job.checkpoint->filename().string() : job.model);
    timm::log_info("Running bulk validation on these pretrained models: " + timm::joined_names(names));
  } else {
    std::optional<std::filesystem::path> checkpoint;
    if (args.has("checkpoint")) checkpoint = timm::find_checkpoints(args.get("checkpoint")).front();
    jobs.push_back({args.get("model"), checkpoint, args.get_switch("pretrained")});
  }
  // The channels the checkpoint was trained with, unless --in-chans says.
  int64_t in_chans = timm::resolve_in_chans(timm::data_flags_config(args), defaults);
  if (jobs.front().checkpoint && !args.given("in-chans") && !args.given("input-size")) {
    if (auto c = timm::checkpoint_shape(*jobs.front().checkpoint, jobs.front().model).in_chans) in_chans = *c;
  }
  timm::check_input_img_mode(args.get_optional("input-img-mode"), in_chans);
  timm::IterableOptions keys;
  keys.input_key = args.get("input-key");
  keys.target_key = args.get("target-key");
  auto dataset = timm::first_samples(timm::create_dataset(dataset_name, args.get("data-dir"), args.get("split"),
                                                          in_chans, args.get("class-map"), keys),
                                     args.get_optional_int("num-samples"), "num-samples");

  // validate.py: --retry, and every job of a bulk run, where a job that
  // fails is left out.
  const int64_t batch_size = args.get_int_at_least("batch-size", 1);
  std::vector<timm::ResultRow> rows;
  for (const Job& job : jobs) {
    const std::string what = job.model + (job.checkpoint ? " (" + job.checkpoint->string() + ")" : "");
    const auto validate_at = [&](int64_t batch) {
      rows.push_back(validate_one(args, job, dataset, defaults, in_chans, precision, batch));
    };
    if (!bulk && !args.get_switch("retry")) {
      validate_at(batch_size);
      continue;
    }
    std::string failed;
    try {
      const timm::BatchRetryOutcome outcome = timm::run_with_batch_retry(batch_size, "validation", validate_at);
      if (outcome.ran) continue;
      failed = what + " failed to validate at every batch size down to 1: " + outcome.error;
    } catch (const timm::Error& e) {
      if (!bulk) throw;
      failed = what + " failed to validate: " + e.what();  // e.g. its pretrained weights not in the hub cache
    }
    if (!bulk) throw timm::Error(failed);
    timm::log_error(failed);
  }
  if (rows.empty()) throw timm::Error("bulk validation: no model validated (the errors above say why)");
  // validate.py sorts bulk results by top-1, best first.
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return top1_of(a) > top1_of(b); });

  // validate.py: a bulk run's results are a list, a single one's an object.
  std::cout << "--result\n" << timm::format_results(rows, "json", /*single=*/!bulk) << std::flush;
  if (args.has("results-file")) {
    timm::write_results_file(args.get("results-file"), rows, args.get("results-format"), /*single=*/!bulk);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-validate", argc, argv, run); }
