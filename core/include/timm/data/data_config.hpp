// timm's resolve_data_config: the input size, interpolation, mean, std and
// crop the data pipeline uses, from the flags, the dataset and the model's
// pretrained config. The data pipeline knows a model only through this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "timm/data/transform.hpp"
#include "timm/models/model.hpp"

namespace timm {

class Config;

struct DataConfig {
  std::vector<int64_t> input_size;  // C, H, W
  std::string interpolation;
  std::vector<double> mean;
  std::vector<double> std;
  double crop_pct = 0.875;
  std::string crop_mode = "center";
};

// What a built-in dataset implies when the flags do not say otherwise:
// Fashion-MNIST is 1 x 28 x 28 with its own mean and std. Unset for folders.
struct DatasetDefaults {
  std::optional<int64_t> in_chans;
  std::optional<int64_t> img_size;
  std::optional<std::vector<double>> mean;
  std::optional<std::vector<double>> std;
};
DatasetDefaults dataset_defaults(const std::string& dataset_name);

// The number of input channels: --in-chans, else --input-size[0], else the
// dataset's, else 3.
int64_t resolve_in_chans(const Config& config, const DatasetDefaults& dataset);

// Priority for each field: the flags, then the dataset, then the model's
// pretrained config, then timm's defaults. A --mean/--std of one value is
// repeated per channel; another length must equal the channel count. With
// `use_test_size` (the tools' default, as validate.py's) the pretrained
// config's test_input_size and test_crop_pct come before its input_size and
// crop_pct where it has them; training uses the training ones.
DataConfig resolve_data_config(const Config& config, const PretrainedCfg& pretrained, const DatasetDefaults& dataset,
                               bool use_test_size = false);

// A model's mean or std for `channels` input channels: as they are when they
// have one value per channel, else their mean for every channel (a model's
// statistics are per RGB channel; timm's prefetcher adapts them this way to
// a model created with another channel count).
std::vector<double> adapt_to_channels(const std::vector<double>& values, int64_t channels);

// The arguments of timm's eval transform for `data`:
// create_transform(**data_config, is_training=False). The train transform
// starts from these and adds the augmentation flags.
TransformArgs eval_transform_args(const DataConfig& data);

// timm's "Data processing configuration" log lines.
std::vector<std::string> describe_data_config(const DataConfig& data_config);

}  // namespace timm
