// Datasets: indexable collections of (image, target).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "timm/data/class_map.hpp"
#include "timm/data/image.hpp"

namespace timm {

class Sampler;  // timm/data/loader.hpp

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
  // The sample's image file, not decoded, for a loader that works on the
  // file (--jpeg-dct-scale, LoaderOptions::jpeg_dct_scale): image(index) is
  // decode_image(bytes, describe(index), channels) of it. nullopt (the
  // default) for a dataset that holds pixels (Fashion-MNIST, CIFAR). Throws
  // Error on an unreadable file, as image().
  virtual std::optional<EncodedImage> encoded(std::size_t /*index*/) const { return std::nullopt; }
};

// What an iterable dataset's sample order depends on: the loader's and the
// process group's settings (timm's reader learns them from the DataLoader and
// torch.distributed).
struct StreamConfig {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t num_workers = 0;  // the loader's workers (-j); 0 is one stream, as timm's max(1, num_workers)
  int64_t batch_size = 1;   // the loader's batch size
  int64_t seed = 42;        // --seed: timm's common seed
  bool is_training = false;
};

// timm's IterableDataset readers (wds/): the samples come as streams, one
// per loader worker of each rank, in an order of their own. Here they are
// still indexable (image(i) decodes one sample), and make_sampler gives the
// order timm's loader yields: a loader over this dataset takes that sampler
// in place of the map-style ones (make_local_sampler, dist/sampler.hpp).
class IterableDataset : public Dataset {
 public:
  // This rank's sample order per epoch, and its batch boundaries
  // (Sampler::batch_sizes). Throws UsageError when `config` cannot stream
  // this dataset.
  virtual std::shared_ptr<Sampler> make_sampler(const StreamConfig& config) const = 0;
  // timm's num_samples argument (--train-num-samples, --val-num-samples): the
  // same samples with the split's sample count replaced, which sets the epoch
  // length (it cuts nothing).
  virtual std::shared_ptr<const IterableDataset> with_num_samples(int64_t num_samples) const = 0;
};

// The first `count` samples of `dataset`, in its order, for quick runs on a
// part of the data (timm-run's --train-num-samples and --val-num-samples, the
// tools' --num-samples): `dataset` itself when `count` is unset or not below
// its size. An IterableDataset takes `count` as its num_samples instead
// (timm's meaning of those flags: the epoch length of a streamed dataset). A
// count below 1 throws UsageError "--<flag> <count>: expected a positive
// count"; `flag` is the flag's name without dashes.
std::shared_ptr<const Dataset> first_samples(std::shared_ptr<const Dataset> dataset, std::optional<int64_t> count,
                                             const std::string& flag);

// --epoch-repeats for a map-style dataset: an epoch of
// ceil(max(1, repeats) * size) samples, sample i being dataset's i % size, so
// a shuffling sampler draws each sample floor(repeats) or ceil(repeats) times
// per epoch. timm applies the flag only to its iterable readers (and its wds
// reader not at all) and ignores it elsewhere; this gives the other datasets
// the same meaning. An IterableDataset applies it itself (IterableOptions)
// and is returned as it is. repeats below 0, NaN or an epoch above
// kMaxRepeatedSamples throw UsageError naming --epoch-repeats.
inline constexpr std::size_t kMaxRepeatedSamples = std::size_t{1} << 31;
std::shared_ptr<const Dataset> repeated_samples(std::shared_ptr<const Dataset> dataset, double repeats);

// timm's class index of the folder and tar readers (class_to_idx): the
// distinct class names `labels` in timm's natural_key order (natural_less),
// each mapped to its position; its size is the class count. Names that order
// ties ("a" and "A") keep their byte order (timm's order for them follows
// Python's set).
std::map<std::string, int64_t> class_to_idx(const std::set<std::string>& labels);

// timm's image test of its folder and tar readers (IMG_EXTENSIONS): the
// extension of the file name `name` as os.path.splitext finds it (from the
// last dot; none for a name whose only dots lead it, such as ".png"), in any
// case, is .png, .jpg or .jpeg.
bool has_image_extension(std::string_view name);

// timm's ImageFolder: class = sub-folder, classes in timm's case-insensitive
// natural order, .png/.jpg/.jpeg (any case), samples in natural path order.
// `channels` is 3 (RGB) or 1 (L). Zero images throws Error naming `root`.
// With a `class_map` (--class-map, timm's class_to_idx argument) the map
// gives the targets in place of the sorted class index, images of folders
// the map does not name are dropped, a name with no folder is no error, and
// num_classes() is class_map_num_classes(); no image left throws Error.
std::unique_ptr<Dataset> make_image_folder(const std::filesystem::path& root, int64_t channels,
                                           const ClassMap* class_map = nullptr);

// timm's ReaderImageInTar: `root` is one .tar file or a folder whose *.tar
// files are shards (a tar may hold tars, one level deep). Members with an
// image extension are samples; the label is the member's folder (or, for a
// member at a shard's top level, the shard's name); classes and samples in
// timm's natural order (samples by member path). describe() is
// "<tar path>:<member path>". No .tar or no image throws Error. A
// `class_map` applies as make_image_folder's.
std::unique_ptr<Dataset> make_image_in_tar(const std::filesystem::path& root, int64_t channels,
                                           const ClassMap* class_map = nullptr);

// Fashion-MNIST from the IDX files (gzipped or not) in `root`: split "train"
// reads train-*, any eval split reads t10k-*. 28x28 grayscale, 10 classes.
std::unique_ptr<Dataset> make_fashion_mnist(const std::filesystem::path& root, const std::string& split,
                                            int64_t channels);

// torchvision's CIFAR10 (`name` "cifar10") or CIFAR100 ("cifar100") from the
// Python version's pickled batches, as timm's create_dataset("torch/cifar10")
// reads them: root/cifar-10-batches-py/data_batch_1..5 (train) or test_batch,
// root/cifar-100-python/train or test (fine labels). Each batch is a dict
// with 'data' (a uint8 numpy array, N x 3072: the R, G and B planes of 32x32
// images) and 'labels' (else 'fine_labels'), read by timm/io/pickle.hpp with
// an allow-list of globals (numpy's _reconstruct, ndarray, dtype;
// _codecs.encode): no code runs, and a missing, malformed or hostile file
// throws Error naming it. Images are RGB 32x32 (converted to `channels`);
// describe() is "torch/cifar10[<index>]".
std::unique_ptr<Dataset> make_cifar(std::string_view name, const std::filesystem::path& root, bool train,
                                    int64_t channels);

// The folder the Debian package dataset-fashion-mnist installs.
inline const std::filesystem::path kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Whether `name` is one of create_dataset's names of Fashion-MNIST:
// "fashion-mnist", "fashion_mnist" or "torch/fashion_mnist".
bool is_fashion_mnist(std::string_view name);

// The dataset of a run that names none (--dataset empty): the image folder
// when --data-dir is given, else the built-in Fashion-MNIST.
std::string default_dataset_name(const std::string& dataset, bool has_data_dir);

// timm's split folder search: root/<split>, else the synonyms of train
// (train, training) or eval (val, valid, validation, eval, evaluation), else
// root itself.
std::filesystem::path find_split_folder(const std::filesystem::path& root, const std::string& split);

// The options of timm's iterable readers (wds/); a map-style dataset takes
// none (create_dataset refuses them there).
struct IterableOptions {
  double repeats = 0;      // --epoch-repeats: the epoch is max(1, repeats) passes (repeated_samples elsewhere)
  std::string input_key;   // --input-key; empty: 'jpg;png;webp'
  std::string target_key;  // --target-key; empty: the .cls member
};

// timm's ReaderWds (timm/data/readers/reader_wds.py, webdataset 1.0.2) over
// the local shards of `root`: `split` is a split of root's _info.json (else
// info.json), or a brace pattern of shard names with an optional sample
// count, "name-{0000..0009}.tar|N" ('::' separates several patterns). Tar
// members group into samples by key (the path up to the first dot of the
// file name; the rest, lower-cased, is the field); the image is the first
// field of options.input_key present, the target the int in the .cls
// member, or with a target key (or the split's alt_label) that field of the
// .json member (a negative value drops the sample). The shards are scanned
// once, here: a shard that is missing is an Error naming it, a broken one
// keeps its samples before the damage (with a warning, as webdataset's
// handler), a sample without an image or a readable target is left out with
// a warning, a missing json field is an Error naming the sample and the
// fields it has. A `class_map` maps the integer targets: its names must be
// the source class indices ("3"). num_classes() is the map's, else the
// largest target + 1. describe() is "<shard path>:<key>". docs/datasets-wds.md
// has the sample order and how it differs from timm's.
std::unique_ptr<IterableDataset> make_wds(const std::filesystem::path& root, const std::string& split, int64_t channels,
                                          const IterableOptions& options, const ClassMap* class_map = nullptr);

// webdataset's expand_urls: '::' separates patterns, each brace-expanded as
// the braceexpand package does ({a,b}, nested; {0..9}, {00..10} padded,
// {1..9..2}; a backslash escapes), in order. No environment variables are
// substituted, and character ranges ({a..e}) stay as text. Unbalanced braces
// or more than a million names throw UsageError.
std::vector<std::string> wds_expand_urls(const std::string& urls);

// create_dataset: "" or "image_folder" -> as timm's create_reader: a root
// that is a file ending in ".tar" -> image-in-tar, else ImageFolder under the
// split folder; "tar" or "image_in_tar" (timm-cpp's names; timm reaches a
// folder of shards only through its Python API) -> image-in-tar over the
// split folder (a folder of shards) or the .tar file;
// "fashion-mnist" (also "fashion_mnist") -> IDX files in `root`, or the
// Debian package's folder when root is empty;
// "torch/<name>" (the prefix in any case, <name> lowercased, as timm) ->
// torchvision's dataset in `root` (no downloads), the train set for a split
// of exactly "train" or "training" (timm's _TRAIN_SYNONYM), else the test set:
//   mnist, kmnist, fashion_mnist, qmnist: root/<MNIST, KMNIST, FashionMNIST,
//     QMNIST>/raw/ IDX files (uncompressed or .gz), L 28x28, 10 classes
//     (QMNIST: the qmnist-train/-test files, the class in the labels' first
//     column); "torch/fashion_mnist" without a root reads the Debian
//     package's folder as "fashion-mnist" does;
//   cifar10, cifar100: make_cifar.
// describe() is "torch/<name>[<index>]";
// "wds/<name>" (the prefix in any case) -> make_wds over `root` (the name
// itself is not used, as timm's).
// Anything else throws UsageError. `iterable` applies to wds/ only: set for
// another dataset it is a UsageError (timm ignores --epoch-repeats there).
// `class_map` (--class-map; empty: none) is read by load_class_map with the
// reader's root (the split folder, the .tar or the folder of shards) and
// applies to the image folder, image-in-tar and wds readers; with another
// dataset it is a UsageError (timm ignores it there).
std::unique_ptr<Dataset> create_dataset(const std::string& name, const std::filesystem::path& root,
                                        const std::string& split, int64_t channels,
                                        const std::filesystem::path& class_map = {},
                                        const IterableOptions& iterable = {});

// --input-img-mode (train.py's and validate.py's): the datasets decode to
// the model's channels (timm's default mode: 'RGB' for 3, else 'L'). A mode
// given must be one our images hold (RGB, L) and give `channels`; throws
// UsageError naming the flag otherwise (timm would fail at the first
// forward instead).
void check_input_img_mode(const std::optional<std::string>& mode, int64_t channels);

}  // namespace timm
