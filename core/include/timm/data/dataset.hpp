// Datasets: indexable collections of (image, target).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "timm/data/image.hpp"

namespace timm {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  // The decoded image, converted to `channels()`. Throws Error on a bad file.
  virtual Image image(std::size_t index) const = 0;
  virtual int64_t target(std::size_t index) const = 0;
  virtual int64_t num_classes() const = 0;
  // A name for messages: the file path or "fashion-mnist[123]".
  virtual std::string describe(std::size_t index) const = 0;
};

// timm's ImageFolder: class = sub-folder, classes in timm's case-insensitive
// natural order, .png/.jpg/.jpeg (any case), samples in natural path order.
// `channels` is 3 (RGB) or 1 (L). Zero images throws Error naming `root`.
std::unique_ptr<Dataset> make_image_folder(const std::filesystem::path& root, int64_t channels);

// Fashion-MNIST from the IDX files (gzipped or not) in `root`: split "train"
// reads train-*, any eval split reads t10k-*. 28x28 grayscale, 10 classes.
std::unique_ptr<Dataset> make_fashion_mnist(const std::filesystem::path& root, const std::string& split,
                                            int64_t channels);

// The folder the Debian package dataset-fashion-mnist installs.
inline const std::filesystem::path kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// timm's split folder search: root/<split>, else the synonyms of train
// (train, training) or eval (val, valid, validation, eval, evaluation), else
// root itself.
std::filesystem::path find_split_folder(const std::filesystem::path& root, const std::string& split);

// create_dataset: "" or "image_folder" -> ImageFolder under the split folder;
// "fashion-mnist" (also "torch/fashion_mnist") -> IDX files in `root`, or the
// Debian package's folder when root is empty. Anything else throws UsageError.
std::unique_ptr<Dataset> create_dataset(const std::string& name, const std::filesystem::path& root,
                                        const std::string& split, int64_t channels);

}  // namespace timm
