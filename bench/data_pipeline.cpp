// timm-bench-data: images/s of the C++ input pipeline alone.
//
//   timm-bench-data train <image folder> [threads] [batch size]
//       the train loader: decode, create_transform(is_training) stages
//       (RandomResizedCrop 224, flip), uint8 batches, float + normalise
//   timm-bench-data decode <image folder>
//       one thread: decode_image, raw tjDecompress2 (libjpeg-turbo's own
//       rate) and 1/2 DCT-scaled decodes of the files, held in memory
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "timm/core/plugin_loader.hpp"
#include "timm/core/registry.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image.hpp"
#include "timm/data/loader.hpp"
#include "timm/data/transform.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int bench_train(const fs::path& folder, int64_t threads, int64_t batch_size) {
  timm::load_plugins(timm::Registry::global(), timm::plugin_search_path({}));
  std::shared_ptr<const timm::Dataset> dataset = timm::create_dataset("", folder, "train", 3);
  timm::TransformArgs args;
  args.is_training = true;
  args.color_jitter = std::nullopt;  // the benchmark's stages: crop and flip
  timm::TransformPipeline pipeline = timm::create_transform(args);
  std::string stages = pipeline.repr();
  std::replace(stages.begin(), stages.end(), '\n', ' ');
  std::printf("stages %s\n", stages.c_str());
  timm::Loader loader(dataset, timm::make_local_sampler(dataset->size(), true, 42), pipeline,
                      {.batch_size = batch_size, .drop_last = false, .num_workers = threads, .seed = 42});
  timm::Rng rng(0);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {  // epoch 0 warms the page cache
    loader.start_epoch(epoch);
    const auto start = Clock::now();
    int64_t images = 0;
    while (auto batch = loader.next()) {
      at::Tensor x = batch->images.to(at::kFloat);
      pipeline.apply(x, rng);
      images += x.size(0);
    }
    std::printf("epoch %ld images %ld seconds %.3f images/s %.1f\n", static_cast<long>(epoch),
                static_cast<long>(images), seconds_since(start), images / seconds_since(start));
  }
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
      const auto start = Clock::now();
      for (const auto& f : files) decode(f);
      best = std::min(best, seconds_since(start));
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: timm-bench-data train|decode <image folder> [threads] [batch size]\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "train")
      return bench_train(argv[2], argc > 3 ? std::stol(argv[3]) : 2, argc > 4 ? std::stol(argv[4]) : 64);
    if (mode == "decode") return bench_decode(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "timm-bench-data: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "timm-bench-data: unknown mode '%s'; expected train or decode\n", mode.c_str());
  return 2;
}
