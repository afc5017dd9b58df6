// timm-bench-data: images/s of the C++ input pipeline alone.
//
//   timm-bench-data train <image folder> [--workers 2] [--batch-size 64]
//                   [--aa rand-m9-mstd0.5-inc1] [--reprob 0.25] [--remode pixel]
//                   [--img-size 224] [--jpeg-dct-scale]
//       the train loader: decode, create_transform(is_training) stages
//       (RandomResizedCrop 224, flip, RandAugment), uint8 batches, float +
//       normalise + random erasing (--aa '' and --reprob 0: crop and flip only);
//       --jpeg-dct-scale: timm-run's flag, JPEGs decoded at a DCT scale for the crop
//   timm-bench-data naflex <image folder> [--workers 2] [--batch-size 64]
//                   [--aa rand-m9-mstd0.5-inc1] [--reprob 0.25] [--remode pixel]
//       timm-run's --naflex-loader train loader (timm's create_naflex_loader
//       defaults: sequence lengths 128 256 576 784 1024, patch 16, a token
//       budget of batch size x 1024): decode, RandomResizedCropToSequence,
//       flip, RandAugment, patches padded per batch, then normalised and
//       erased as patches (PatchRandomErasing)
//   timm-bench-data decode <image folder>
//       one thread: decode_image, raw tjDecompress2 (libjpeg-turbo's own
//       rate) and 1/2 DCT-scaled decodes of the files, held in memory
#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "timm/base/app_main.hpp"
#include "timm/base/error.hpp"
#include "timm/base/stopwatch.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/naflex.hpp"
#include "timm/data/naflex_random_erasing.hpp"
#include "timm/data/naflex_sampler.hpp"
#include "timm/data/transform.hpp"
#include "timm/plugin/loader.hpp"
#include "timm/plugin/registry.hpp"
#include "timm/tools/tool_args.hpp"

namespace fs = std::filesystem;

namespace {

struct TrainBench {
  int64_t threads = 2;
  int64_t batch_size = 64;
  std::string auto_augment;
  double re_prob = 0.0;
  std::string re_mode;
  int64_t img_size = 224;
  bool jpeg_dct_scale = false;
};

// Prints each epoch's images/s (epoch 0 warms the page cache).
template <typename NextBatchSize>
void time_epochs(timm::Loader& loader, NextBatchSize&& next_batch_size) {
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    const timm::Stopwatch watch;
    int64_t images = 0;
    while (const int64_t n = next_batch_size()) images += n;
    const double seconds = watch.seconds();
    std::printf("epoch %ld images %ld seconds %.3f images/s %.1f\n", static_cast<long>(epoch),
                static_cast<long>(images), seconds, images / seconds);
  }
}

int bench_train(const fs::path& folder, const TrainBench& bench) {
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path({}));
  std::shared_ptr<const timm::Dataset> dataset = timm::create_dataset("", folder, "train", 3);
  timm::TransformArgs args;
  args.is_training = true;
  args.color_jitter = std::nullopt;  // no colour jitter, as with RandAugment on
  args.auto_augment = bench.auto_augment;
  args.re_prob = bench.re_prob;
  args.re_mode = bench.re_mode;
  args.input_size = {3, bench.img_size, bench.img_size};
  const int64_t threads = bench.threads;
  const int64_t batch_size = bench.batch_size;
  timm::TransformPipeline pipeline = timm::create_transform(args);
  std::string stages = pipeline.repr();
  std::replace(stages.begin(), stages.end(), '\n', ' ');
  std::printf("stages %s\n", stages.c_str());
  std::printf("jpeg-dct-scale %s\n", bench.jpeg_dct_scale ? (pipeline.takes_jpeg() ? "on" : "on, unused") : "off");
  timm::Loader loader(dataset, timm::make_local_sampler(dataset->size(), true, 42), pipeline,
                      {.batch_size = batch_size,
                       .drop_last = false,
                       .num_workers = threads,
                       .seed = 42,
                       .jpeg_dct_scale = bench.jpeg_dct_scale,
                       .naflex = {},
                       .naflex_mixup = nullptr});
  timm::Rng rng(0);
  time_epochs(loader, [&]() -> int64_t {
    const std::optional<timm::Batch> batch = loader.next();
    if (!batch) return 0;
    return timm::prepare_input(batch->images, pipeline, rng, {}).size(0);  // as timm-run on the CPU
  });
  return 0;
}

int bench_naflex(const fs::path& folder, const TrainBench& bench) {
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path({}));
  std::shared_ptr<const timm::Dataset> dataset = timm::create_dataset("", folder, "train", 3);
  timm::NaFlexSamplerOptions sampler_options;
  sampler_options.max_tokens_per_batch = bench.batch_size * 1024;
  auto sampler = std::make_shared<timm::NaFlexBatchSampler>(static_cast<int64_t>(dataset->size()), sampler_options);
  std::vector<timm::TransformPipeline> transforms;
  timm::LoaderOptions options;
  options.batch_size = bench.batch_size;
  options.num_workers = bench.threads;
  options.seed = 42;
  for (const int64_t seq_len : sampler->seq_lens()) {
    timm::TransformArgs args;
    args.is_training = true;
    args.color_jitter = std::nullopt;  // no colour jitter, as with RandAugment on
    args.auto_augment = bench.auto_augment;
    args.naflex = timm::NaFlexTransformArgs{{16, 16}, seq_len};
    transforms.push_back(timm::create_transform(args));
    options.naflex.push_back(*args.naflex);
  }
  std::optional<timm::PatchRandomErasing> erasing;
  if (bench.re_prob > 0) {
    timm::PatchRandomErasingOptions erase;
    erase.erasing.probability = bench.re_prob;
    erase.erasing.mode = bench.re_mode;
    erasing.emplace(erase);
  }
  std::string stages = transforms.back().repr() + (erasing ? " " + erasing->repr() : "");
  std::replace(stages.begin(), stages.end(), '\n', ' ');
  std::printf("stages %s\n", stages.c_str());
  timm::Loader loader(dataset, sampler, transforms, options);
  const std::vector<double> mean{0.485, 0.456, 0.406}, std{0.229, 0.224, 0.225};
  timm::Rng rng(0);
  time_epochs(loader, [&]() -> int64_t {
    const std::optional<timm::Batch> batch = loader.next();
    if (!batch) return 0;
    // As timm-run's train loop on the CPU: normalised, then erased, as patches.
    at::Tensor patches = timm::normalize_patches(batch->patches.patches, mean, std);
    if (erasing) erasing->apply(patches, batch->patches.patch_coord, batch->patches.patch_valid, 3, rng);
    return patches.size(0);
  });
  return 0;
}

int bench_decode(const fs::path& folder) {
  std::vector<std::vector<std::uint8_t>> files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.path().extension() != ".jpg") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Best of three passes: the machine is shared and the first pass pays
  // for page faults.
  auto rate = [&](const char* name, auto&& decode) {
    double best = 1e30;
    for (int pass = 0; pass < 3; ++pass) {
      const timm::Stopwatch watch;
      for (const auto& f : files) decode(f);
      best = std::min(best, watch.seconds());
    }
    std::printf("decode %s images %zu images/s %.1f\n", name, files.size(), files.size() / best);
  };
  rate("timm-cpp", [](const auto& f) { return timm::decode_image(f, "bench", 3); });
  tjhandle tj = tjInitDecompress();
  std::vector<std::uint8_t> buffer;
  rate("tjDecompress2", [&](const auto& f) {
    int w = 0, h = 0, sub = 0, cs = 0;
    auto* data = const_cast<unsigned char*>(f.data());
    tjDecompressHeader3(tj, data, f.size(), &w, &h, &sub, &cs);
    buffer.resize(static_cast<std::size_t>(w) * h * 3);
    return tjDecompress2(tj, data, f.size(), buffer.data(), w, 0, h, TJPF_RGB, 0);
  });
  tjDestroy(tj);
  rate("timm-cpp-dct-1/2", [](const auto& f) { return timm::decode_jpeg_scaled(f, "bench", 3, 2); });
  return 0;
}

int run(int argc, char** argv) {
  timm::ToolArgs args("timm-bench-data", "Images/s of the C++ input pipeline alone (bench/data_pipeline.py runs it).");
  args.add_positional("MODE",
                      "train (the train loader and transforms), naflex (the --naflex-loader train loader) or decode "
                      "(single-thread decode rates)");
  args.add_positional("FOLDER", "the image folder (train: class sub-folders, as ImageFolder)");
  args.add("workers", "j", "2", "train: loader threads");
  args.add("batch-size", "b", "64", "train: batch size");
  args.add("aa", "", "rand-m9-mstd0.5-inc1", "train: auto-augment config, as timm's --aa ('' for none)");
  args.add("reprob", "", "0.25", "train: random erasing probability, as timm's --reprob");
  args.add("remode", "", "pixel", "train: random erasing mode, as timm's --remode");
  args.add("img-size", "", "224", "train: the crop's output size (square)");
  args.add_switch("jpeg-dct-scale", "",
                  "train: decode JPEGs at a DCT scale for the crop, as timm-run's --jpeg-dct-scale");
  if (!args.parse_or_print_help(argc, argv)) return 0;
  const std::string mode = args.get("MODE");
  if (mode == "train" || mode == "naflex") {
    const TrainBench bench{.threads = args.get_int_at_least("workers", 0),
                           .batch_size = args.get_int_at_least("batch-size", 1),
                           .auto_augment = args.get("aa"),
                           .re_prob = args.get_double("reprob"),
                           .re_mode = args.get("remode"),
                           .img_size = args.get_int_at_least("img-size", 1),
                           .jpeg_dct_scale = args.get_switch("jpeg-dct-scale")};
    return mode == "naflex" ? bench_naflex(args.get("FOLDER"), bench) : bench_train(args.get("FOLDER"), bench);
  }
  if (mode == "decode") return bench_decode(args.get("FOLDER"));
  throw timm::UsageError("MODE " + timm::in_quotes(mode) + ": expected train, naflex or decode");
}

}  // namespace

int main(int argc, char** argv) { return timm::run_app("timm-bench-data", argc, argv, run); }
