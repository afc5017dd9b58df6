// timm-bench: forward + backward throughput of one model on random input, the
// C++ half of bench/models.py (which runs Python timm the same way).
//
//   timm-bench --model NAME [--batch-size 32] [--img-size 224] [--in-chans 3]
//              [--num-classes 1000] [--warmup 2] [--iters 5] [--threads T]
//              [--channels-last] [--plugin-dir DIR]
//
// Each iteration: zero grads, forward in train mode, cross-entropy against
// random targets, backward. Prints one line of JSON: model, batch_size,
// img_size, threads, seconds per iteration (median), images_per_second.
// An unknown model exits 2 with the registry's suggestions.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "timm/core/error.hpp"
#include "timm/core/plugin_loader.hpp"
#include "timm/core/registry.hpp"
#include "timm/log/log.hpp"
#include "timm/models/channels_last.hpp"
#include "timm/models/model.hpp"

namespace {

struct Options {
  std::string model;
  int64_t batch_size = 32, img_size = 224, in_chans = 3, num_classes = 1000, warmup = 2, iters = 5, threads = 0;
  bool channels_last = false;
  std::vector<std::string> plugin_dirs;
};

int64_t positive(const std::string& flag, const std::string& value, bool allow_zero = false) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(value, &used);
    if (used == value.size() && (v > 0 || (allow_zero && v == 0))) return v;
  } catch (const std::exception&) {
  }
  throw timm::UsageError(flag + " " + timm::in_quotes(value) + ": expected a positive integer");
}

Options parse(int argc, char** argv) {
  Options o;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw timm::UsageError(flag + ": expected a value");
      return args[++i];
    };
    if (flag == "--model")
      o.model = value();
    else if (flag == "--batch-size")
      o.batch_size = positive(flag, value());
    else if (flag == "--img-size")
      o.img_size = positive(flag, value());
    else if (flag == "--in-chans")
      o.in_chans = positive(flag, value());
    else if (flag == "--num-classes")
      o.num_classes = positive(flag, value());
    else if (flag == "--warmup")
      o.warmup = positive(flag, value(), true);
    else if (flag == "--iters")
      o.iters = positive(flag, value());
    else if (flag == "--threads")
      o.threads = positive(flag, value());
    else if (flag == "--channels-last")
      o.channels_last = true;
    else if (flag == "--plugin-dir")
      o.plugin_dirs.push_back(value());
    else
      throw timm::UsageError("unknown argument " + timm::in_quotes(flag));
  }
  if (o.model.empty()) throw timm::UsageError("--model is required");
  return o;
}

double step(timm::ClassifierImpl& model, const at::Tensor& input, const at::Tensor& target) {
  const auto start = std::chrono::steady_clock::now();
  model.zero_grad();
  const at::Tensor loss = at::cross_entropy_loss(model.forward(input), target);
  loss.backward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path(o.plugin_dirs));
  if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
  timm::ModelArgs args;
  args.num_classes = o.num_classes;
  args.in_chans = o.in_chans;
  timm::ModelPtr model = timm::create_model(o.model, args);
  model->train();
  at::manual_seed(0);
  at::Tensor input = at::randn({o.batch_size, o.in_chans, o.img_size, o.img_size});
  if (o.channels_last) {
    timm::to_channels_last(*model);
    input = input.contiguous(at::MemoryFormat::ChannelsLast);
  }
  const at::Tensor target = at::randint(o.num_classes, {o.batch_size}, at::kLong);
  for (int64_t i = 0; i < o.warmup; ++i) step(*model, input, target);
  std::vector<double> times;
  for (int64_t i = 0; i < o.iters; ++i) times.push_back(step(*model, input, target));
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  nlohmann::json out{{"model", o.model},           {"batch_size", o.batch_size},
                     {"img_size", o.img_size},     {"threads", at::get_num_threads()},
                     {"seconds_per_iter", median}, {"images_per_second", static_cast<double>(o.batch_size) / median}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  timm::setup_logging();
  try {
    return run(argc, argv);
  } catch (const timm::Error& e) {
    std::cerr << "timm-bench: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "timm-bench: error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "timm-bench: error: " << e.what() << "\n";
    return 1;
  }
}
