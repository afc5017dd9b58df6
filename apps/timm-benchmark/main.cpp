// timm-benchmark: inference and training throughput of a model at a batch
// size on synthetic input, as timm's benchmark.py measures it: warm-up
// steps, then timed steps; samples/s = samples / wall time of the timed steps.
// Besides benchmark.py's modes, `--bench fwd-bwd` times forward + backward
// in train mode without an optimizer (what bench/models.py compares against
// Python timm).
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <system_error>

#include "timm/base/app_main.hpp"
#include "timm/base/cpu_allocator.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/model_args.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/optim/optimizer.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/batch_retry.hpp"
#include "timm/tools/eval_setup.hpp"
#include "timm/tools/results_file.hpp"
#include "timm/train/amp.hpp"
#include "timm/train/clip_grad.hpp"
#include "timm/train/losses.hpp"

namespace {

timm::ToolArgs make_args() {
  timm::ToolArgs args("timm-benchmark", "Benchmarks a model's inference and training throughput (benchmark.py).");
  timm::add_model_data_flags(args, "resnet50");
  args.add("batch-size", "b", "256", "mini-batch size");
  args.add("bench", "", "both",
           "benchmark mode: inference, train, both, or fwd-bwd (forward + backward in train mode, no optimizer step)");
  args.add("num-warm-iter", "", "10", "number of warmup iterations");
  args.add("num-bench-iter", "", "40", "number of benchmark iterations");
  args.add("min-bench-time", "", "0",
           "keep timing iterations past --num-bench-iter until this many seconds have passed (0: exactly "
           "--num-bench-iter; bench/models.py gives a fast model as long a timed window as a slow one)");
  args.add_switch("amp", "", "use automatic mixed precision (autocast)");
  args.add("amp-dtype", "", "bfloat16", "autocast dtype: bfloat16 (CPU) or float16");
  args.add_switch("channels-last", "", "use channels_last memory layout");
  timm::add_fast_norm_flag(args);
  timm::add_reparam_flag(args);
  args.add_switch("grad-checkpointing", "",
                  "enable gradient checkpointing through model blocks/stages (train and fwd-bwd benchmarks)");
  args.add("opt", "", "sgd", "optimizer of the train benchmark (from the registry)");
  args.add("lr", "", "0.0001", "learning rate of the train benchmark");
  args.add("momentum", "", "0.9", "optimizer momentum");
  args.add("weight-decay", "", "0.0001", "weight decay");
  args.add("smoothing", "", "0.0", "label smoothing of the train loss (benchmark.py: plain cross-entropy)");
  args.add("opt-eps", "", "", "optimizer epsilon (default: the optimizer's)");
  args.add_list("opt-betas", "", "optimizer betas (default: the optimizer's)");
  args.add("clip-grad", "", "", "clip gradient norm of the train benchmark (default: no clipping)");
  args.add("clip-mode", "", "norm", "gradient clipping mode: norm, value or agc");
  args.add("drop", "", "0.0", "dropout rate");
  args.add("drop-path", "", "", "drop path rate (default: the model's)");
  args.add("drop-block", "", "", "drop block rate (a model with DropBlock)");
  args.add("threads", "", "", "intra-op threads (default: torch's)");
  args.add("profile", "", "",
           "after the timed steps, run --profile-steps more under torch's profiler (CPU ops) and write its Chrome "
           "trace to this file (bench/profile_ops.py compares it op by op with Python timm's)");
  args.add("profile-steps", "", "2", "number of steps --profile records");
  args.add("results-file", "", "", "output CSV or JSON file for the results");
  args.add("results-format", "", "", "csv or json (default: from the file's extension)");
  args.add_list("plugin-dir", "", "extra folders to load plugins from (repeatable)", /*accumulate=*/true);
  timm::add_runtime_flags(args, /*num_gpu=*/false);
  args.add_refused("detail",
                   "its fwd/bwd/opt breakdown profiles with Python's fvcore / DeepSpeed (--profile writes "
                   "torch's op-level trace)");
  args.add("model-list", "", "", "txt file of model names to benchmark, one per line (results sorted by samples/s)");
  args.add_switch("no-retry", "",
                  "do not retry a benchmark that runs out of memory with a smaller batch (by default it does, down to "
                  "1, as benchmark.py: timm's decay_batch_step)");
  args.add("precision", "", "float32",
           "numeric precision: amp (float16 autocast), amp_bfloat16, float16, bfloat16 (weights and input in it) or "
           "float32; --amp overrides it");
  return args;
}

// benchmark.py's resolve_precision: autocast's dtype (unset: no autocast),
// and the weights' and the input's.
struct Precision {
  std::optional<at::ScalarType> amp_dtype;
  at::ScalarType model_dtype = at::kFloat;
};

struct Setup {
  std::string model_name;
  timm::ModelPtr model;
  std::vector<int64_t> input_shape;  // B, C, H, W
  int64_t num_classes = 0;
  int64_t param_count = 0;
  bool channels_last = false;
  at::ScalarType dtype = at::kFloat;        // the weights' and the input's (--precision float16 / bfloat16)
  std::optional<at::ScalarType> amp_dtype;  // autocast's; unset: none
};

at::Tensor make_input(const Setup& setup) {
  at::Tensor x = at::randn(setup.input_shape).to(setup.dtype);
  return setup.channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
}

double ms_per_step(double total_seconds, int64_t steps) { return 1000.0 * total_seconds / steps; }

// --profile: runs `step` --profile-steps more times under torch's Kineto
// profiler (CPU ops with input shapes) and writes the Chrome trace, the format
// of Python's torch.profiler export_chrome_trace, so that both sides' traces
// read alike. Written beside the target and renamed: no half-written trace.
template <class Step>
void profile_steps(const timm::ToolArgs& args, Step step) {
  if (!args.has("profile")) return;
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerState;
  const std::filesystem::path path = args.get("profile");
  const profiler::ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/true);
  const std::set<ActivityType> activities = {ActivityType::CPU};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  const int64_t steps = args.get_int("profile-steps");
  for (int64_t i = 0; i < steps; ++i) step();
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  const std::filesystem::path partial = path.string() + ".partial";
  result->save(partial.string());
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) {
    std::filesystem::remove(partial, error);
    throw timm::Error("--profile " + timm::in_quotes(path.string()) + ": cannot write the trace there");
  }
  timm::log_info(
      timm::format("Profiled %lld steps; trace written to %s", static_cast<long long>(steps), path.string().c_str()));
}

// How many steps to time: at least `iters`, and more until `min_seconds`
// have passed (--min-bench-time).
struct TimedSteps {
  int64_t iters = 1;
  double min_seconds = 0.0;
};

TimedSteps timed_steps(const timm::ToolArgs& args) {
  const double min_seconds = args.get_double("min-bench-time");
  if (!(min_seconds >= 0.0)) {  // also catches NaN
    throw timm::UsageError("--min-bench-time " + timm::in_quotes(args.get("min-bench-time")) +
                           ": expected seconds >= 0");
  }
  return {args.get_int_at_least("num-bench-iter", 1), min_seconds};
}

// Warm-up, then timed steps; logs benchmark.py's progress lines.
template <class Step>
std::pair<double, double> time_steps(const char* label, int64_t warm, TimedSteps timed, int64_t batch, Step step) {
  for (int64_t i = 0; i < warm; ++i) step();
  const timm::Stopwatch total_watch;
  double step_sum = 0.0;
  const int64_t log_every = std::max<int64_t>(1, timed.iters / 5);
  int64_t done = 0;
  while (done < timed.iters || total_watch.seconds() < timed.min_seconds) {
    const timm::Stopwatch step_watch;
    step();
    step_sum += step_watch.seconds();
    ++done;
    if (done % log_every == 0) {
      const double total = total_watch.seconds();
      timm::log_info(timm::format("%s [%lld/%lld]. %0.2f samples/sec. %0.3f ms/step.", label,
                                  static_cast<long long>(done), static_cast<long long>(std::max(done, timed.iters)),
                                  batch * done / total, ms_per_step(total, done)));
    }
  }
  const double total = total_watch.seconds();
  return {batch * done / total, ms_per_step(step_sum, done)};
}

void bench_inference(const timm::ToolArgs& args, Setup& setup, timm::ResultRow& row) {
  setup.model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor x = make_input(setup);
  timm::log_info(timm::format("Running inference benchmark on %s for %lld steps w/ input size %s and batch size %lld.",
                              setup.model_name.c_str(), static_cast<long long>(args.get_int("num-bench-iter")),
                              c10::str(setup.input_shape).c_str(), static_cast<long long>(setup.input_shape[0])));
  std::optional<timm::AutocastGuard> autocast;
  if (setup.amp_dtype) autocast.emplace(at::kCPU, *setup.amp_dtype);
  const auto [rate, step_ms] = time_steps("Infer", args.get_int("num-warm-iter"), timed_steps(args),
                                          setup.input_shape[0], [&] { setup.model->forward(x); });
  profile_steps(args, [&] { setup.model->forward(x); });
  timm::log_info(timm::format("Inference benchmark of %s done. %.2f samples/sec, %.2f ms/step",
                              setup.model_name.c_str(), rate, step_ms));
  row.emplace_back("infer_samples_per_sec", std::round(rate * 100) / 100);
  row.emplace_back("infer_step_time", std::round(step_ms * 1000) / 1000);
  row.emplace_back("infer_batch_size", setup.input_shape[0]);
  row.emplace_back("infer_img_size", setup.input_shape.back());
}

// The train benchmark (zero_grad, forward, loss, backward, optimizer step)
// or, without `optimizer_step`, forward + backward alone (--bench fwd-bwd).
void bench_train(const timm::ToolArgs& args, Setup& setup, bool optimizer_step, timm::ResultRow& row) {
  setup.model->train();
  timm::OptimizerPtr optimizer;
  if (optimizer_step) {
    timm::OptimizerArgs opt;
    opt.opt = args.get("opt");
    opt.lr = args.get_double("lr");
    opt.momentum = args.get_double("momentum");
    opt.weight_decay = args.get_double("weight-decay");
    opt.eps = args.get_optional_double("opt-eps");
    opt.betas = args.get_optional_doubles("opt-betas");
    optimizer = timm::create_optimizer(*setup.model, setup.model->no_weight_decay(), opt);
    timm::log_info("Created " + optimizer->describe());
  }
  const char* label = optimizer_step ? "Train" : "FwdBwd";
  const char* what = optimizer_step ? "train" : "forward + backward";
  const std::string key = optimizer_step ? "train" : "fwd_bwd";
  const double smoothing = args.get_double("smoothing");
  // benchmark.py clips between backward and the optimizer step (AGC leaves the head out).
  const std::optional<double> clip_grad = args.get_optional_double("clip-grad");
  const std::string clip_mode = args.get("clip-mode");
  const bool clip_exclude_head = clip_mode.find("agc") != std::string::npos;
  const at::Tensor x = make_input(setup);
  const at::Tensor target = at::randint(setup.num_classes, {setup.input_shape[0]}, at::kLong);
  timm::log_info(timm::format("Running %s benchmark on %s for %lld steps w/ input size %s and batch size %lld.", what,
                              setup.model_name.c_str(), static_cast<long long>(args.get_int("num-bench-iter")),
                              c10::str(setup.input_shape).c_str(), static_cast<long long>(setup.input_shape[0])));
  auto step = [&] {
    if (optimizer) {
      optimizer->zero_grad();
    } else {
      setup.model->zero_grad();
    }
    at::Tensor loss;
    {
      std::optional<timm::AutocastGuard> autocast;
      if (setup.amp_dtype) autocast.emplace(at::kCPU, *setup.amp_dtype);
      const at::Tensor logits = setup.model->forward(x).to(at::kFloat);
      // benchmark.py's nn.CrossEntropyLoss unless --smoothing is set.
      loss = smoothing > 0.0 ? timm::label_smoothing_cross_entropy(logits, target, smoothing)
                             : at::cross_entropy_loss(logits, target);
    }
    loss.backward();
    if (!optimizer) return;
    if (clip_grad)
      timm::dispatch_clip_grad(timm::model_parameters(*setup.model, clip_exclude_head), *clip_grad, clip_mode);
    optimizer->step();
  };
  const auto [rate, step_ms] =
      time_steps(label, args.get_int("num-warm-iter"), timed_steps(args), setup.input_shape[0], step);
  profile_steps(args, step);
  timm::log_info(timm::format("%s benchmark of %s done. %.2f samples/sec, %.2f ms/sample", label,
                              setup.model_name.c_str(), rate, 1000.0 / rate));
  row.emplace_back(key + "_samples_per_sec", std::round(rate * 100) / 100);
  row.emplace_back(key + "_step_time", std::round(step_ms * 1000) / 1000);
  row.emplace_back(key + "_batch_size", setup.input_shape[0]);
  row.emplace_back(key + "_img_size", setup.input_shape.back());
}

// benchmark.py's resolve_precision, --amp overriding --precision: autocast
// in `amp_dtype`, or the weights and input in `model_dtype`.
Precision resolve_precision(const timm::ToolArgs& args) {
  const at::ScalarType amp_dtype = timm::parse_amp_dtype(args.get("amp-dtype"));
  std::string precision = args.get("precision");
  if (args.get_switch("amp")) {
    if (args.given("precision")) timm::log_warning("Overriding precision to 'amp' since --amp flag set.");
    precision = amp_dtype == at::kHalf ? "amp" : "amp_bfloat16";
  }
  if (precision == "amp") return {at::kHalf, at::kFloat};
  if (precision == "amp_bfloat16") return {at::kBFloat16, at::kFloat};
  if (precision == "float16") return {std::nullopt, at::kHalf};
  if (precision == "bfloat16") return {std::nullopt, at::kBFloat16};
  if (precision == "float32") return {std::nullopt, at::kFloat};
  throw timm::UsageError("--precision " + timm::in_quotes(precision) +
                         ": expected amp, amp_bfloat16, float16, bfloat16 or float32");
}

Setup make_setup(const timm::ToolArgs& args, const std::string& model_name, const Precision& precision,
                 int64_t batch_size) {
  timm::Config config = timm::data_flags_config(args);
  timm::ModelArgs model_args;
  model_args.in_chans = timm::resolve_in_chans(config, {});
  model_args.num_classes = args.get_optional_int("num-classes").value_or(1000);
  model_args.global_pool = args.get_optional("gp");
  model_args.kwargs = args.get_kwargs("model-kwargs");
  model_args.drop_rate = args.get_double("drop");
  model_args.drop_path_rate = args.get_optional_double("drop-path");
  if (auto rate = args.get_optional_double("drop-block")) timm::set_drop_block_rate(model_args, *rate);
  Setup setup;
  setup.model_name = model_name;
  timm::set_fast_norm_if_asked(args);  // benchmark.py: before create_model
  setup.model = timm::create_model(model_name, model_args);
  timm::reparameterize_if_asked(args, *setup.model);  // benchmark.py: right after create_model
  setup.num_classes = model_args.num_classes;
  setup.param_count = timm::count_parameters(*setup.model);
  timm::log_info(timm::format("Model %s created, param count: %lld", model_name.c_str(),
                              static_cast<long long>(setup.param_count)));
  const timm::DataConfig data = timm::resolve_data_config(config, setup.model->pretrained_cfg(), {},
                                                          /*use_test_size=*/!args.get_switch("use-train-size"));
  setup.input_shape = {batch_size};
  setup.input_shape.insert(setup.input_shape.end(), data.input_size.begin(), data.input_size.end());
  setup.dtype = precision.model_dtype;
  setup.amp_dtype = precision.amp_dtype;
  timm::to_model_dtype(*setup.model, setup.dtype);  // benchmark.py: model.to(device, dtype), then channels_last
  setup.channels_last = args.get_switch("channels-last");
  if (setup.channels_last) timm::to_channels_last(*setup.model);
  // benchmark.py: set_grad_checkpointing() right after the model is created.
  if (args.get_switch("grad-checkpointing")) {
    setup.model->set_grad_checkpointing(true);
    timm::release_freed_cpu_memory();  // memory over speed, as timm-run
    timm::log_info("Gradient checkpointing enabled; CPU allocator: " + timm::cpu_allocator_policy().reason);
  }
  return setup;
}

// benchmark.py's bulk mode: the names of --model-list (one per line), or of
// the registered models a --model wildcard matches ('resnet*'); nullopt for
// one model. Throws UsageError for an unreadable or empty list and a
// pattern that matches nothing.
std::optional<std::vector<std::string>> bulk_model_names(const timm::ToolArgs& args) {
  if (args.has("model-list")) return timm::read_model_names("model-list", args.get("model-list"));
  const std::string model = args.get("model");
  const timm::Registry& registry = timm::Registry::global();
  if (registry.find(timm::PluginKind::kModel, model) != nullptr || model.find_first_of("*?[") == std::string::npos) {
    return std::nullopt;
  }
  const std::vector<std::string> names = timm::models_matching("model", model);
  timm::log_info("Running bulk benchmark on these models: " + timm::joined_names(names));
  return names;
}

int run(int argc, char** argv) {
  timm::ToolArgs args = make_args();
  if (!args.parse_or_print_help(argc, argv)) return 0;
  timm::check_runtime_flags(args);
  if (auto threads = args.get_optional_int("threads")) at::set_num_threads(static_cast<int>(*threads));
  const std::string bench = args.get("bench");
  if (bench != "both" && bench != "inference" && bench != "train" && bench != "fwd-bwd") {
    throw timm::UsageError("--bench " + timm::in_quotes(bench) + ": expected inference, train, both or fwd-bwd");
  }
  // Checked before the model is built.
  timed_steps(args);
  args.get_int_at_least("batch-size", 1);
  args.get_int_at_least("num-warm-iter", 0);
  args.get_int_at_least("profile-steps", 1);
  if (args.has("profile")) {
    if (bench == "both") throw timm::UsageError("--profile records one mode: pass --bench inference, train or fwd-bwd");
    const std::filesystem::path folder = std::filesystem::absolute(args.get("profile")).parent_path();
    if (!std::filesystem::is_directory(folder)) {
      throw timm::UsageError("--profile " + timm::in_quotes(args.get("profile")) + ": folder " +
                             timm::in_quotes(folder.string()) + " does not exist");
    }
  }
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(args.get_list("plugin-dir")));
  const Precision precision = resolve_precision(args);
  timm::log_info(precision.amp_dtype
                     ? "Using native Torch AMP (" + timm::dtype_name(*precision.amp_dtype) + ") on the CPU."
                     : "AMP not enabled; weights and input in " + timm::dtype_name(precision.model_dtype) + ".");

  // benchmark.py's runners, one per mode, each on a fresh model.
  using Mode = std::function<void(Setup&, timm::ResultRow&)>;
  std::vector<Mode> modes;
  if (bench == "inference" || bench == "both") {
    modes.emplace_back([&](Setup& s, timm::ResultRow& r) { bench_inference(args, s, r); });
  }
  if (bench == "train" || bench == "both") {
    modes.emplace_back([&](Setup& s, timm::ResultRow& r) { bench_train(args, s, /*optimizer_step=*/true, r); });
  }
  if (bench == "fwd-bwd") {
    modes.emplace_back([&](Setup& s, timm::ResultRow& r) { bench_train(args, s, /*optimizer_step=*/false, r); });
  }
  const bool retry = !args.get_switch("no-retry");
  const int64_t batch_size = args.get_int("batch-size");
  const std::optional<std::vector<std::string>> bulk = bulk_model_names(args);
  std::vector<timm::ResultRow> rows;
  for (const std::string& name : bulk.value_or(std::vector<std::string>{args.get("model")})) {
    timm::ResultRow row{{"model", name}};
    int64_t param_count = 0;
    std::optional<std::string> error;
    for (const Mode& mode : modes) {
      timm::ResultRow mode_row;
      const auto run_at = [&](int64_t batch) {
        mode_row.clear();
        Setup setup = make_setup(args, name, precision, batch);
        param_count = setup.param_count;
        mode(setup, mode_row);
      };
      // benchmark.py's _try_run: an out-of-memory error retries at a smaller batch unless --no-retry.
      if (!retry) {
        run_at(batch_size);
      } else if (const auto outcome = timm::run_with_batch_retry(batch_size, "benchmark", run_at); !outcome.ran) {
        error = outcome.error;
        break;
      }
      row.insert(row.end(), mode_row.begin(), mode_row.end());
    }
    if (error) {
      const std::string failed = name + " failed to benchmark at every batch size down to 1: " + *error;
      if (!bulk) throw timm::Error(failed);
      timm::log_error(failed);  // left out of the results, as benchmark.py's bulk runs
      continue;
    }
    row.emplace_back("param_count", std::round(param_count / 1e4) / 100);
    rows.push_back(std::move(row));
  }
  // benchmark.py sorts bulk results by the first mode's samples/s, fastest first.
  if (bulk)
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a[1].second > b[1].second; });
  const bool single = !bulk;
  std::cout << "--result\n" << timm::format_results(rows, "json", single) << std::flush;
  if (args.has("results-file"))
    timm::write_results_file(args.get("results-file"), rows, args.get("results-format"), single);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-benchmark", argc, argv, run); }
