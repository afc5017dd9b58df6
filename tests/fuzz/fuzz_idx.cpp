// Fuzz target: Fashion-MNIST's IDX files, gzipped or not (zlib passes plain
// files through), read as --dataset fashion-mnist reads them.
//
// The reader takes a folder holding an images and a labels file, so one
// input holds both: a 4-byte little-endian length N, N bytes of the images
// file, then the labels file (N is clamped to what follows: a mutated length
// still splits the input somewhere). tests/fuzz/make_seeds.py writes seeds so.
#include <algorithm>
#include <cstdint>

#include "fuzz_target.hpp"
#include "timm/data/dataset.hpp"

TIMM_FUZZ_TARGET(idx) {
  std::uint32_t images_size = 0;
  const std::size_t header = std::min<std::size_t>(4, data.size());
  for (std::size_t i = 0; i < header; ++i) images_size |= std::uint32_t{data[i]} << (8 * i);
  const timm::fuzz::Bytes rest = data.subspan(header);
  const std::size_t split = std::min<std::size_t>(images_size, rest.size());
  // Plain names: the reader looks for "<stem>.gz" first, then "<stem>", and
  // both are read through gzopen, which tells gzip from plain by its magic.
  const auto images = timm::fuzz::scratch_file("idx/train-images-idx3-ubyte", rest.first(split));
  timm::fuzz::scratch_file("idx/train-labels-idx1-ubyte", rest.subspan(split));
  const auto dataset = timm::make_fashion_mnist(images.parent_path(), "train", 1);
  for (std::size_t i = 0; i < dataset->size(); ++i) {
    timm::fuzz::check_image(dataset->image(i), 1, dataset->describe(i));
    const int64_t target = dataset->target(i);
    if (target < 0 || target >= dataset->num_classes()) {
      timm::fuzz::broken_promise(dataset->describe(i) + ": label " + std::to_string(target) + " of " +
                                 std::to_string(dataset->num_classes()) + " classes");
    }
  }
}
