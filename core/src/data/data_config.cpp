#include "timm/data/data_config.hpp"

#include <sstream>

#include "timm/base/error.hpp"
#include "timm/config/config.hpp"
#include "timm/data/dataset.hpp"

namespace timm {
namespace {

std::vector<double> per_channel(const std::vector<double>& values, int64_t channels, const std::string& flag) {
  if (static_cast<int64_t>(values.size()) == channels) return values;
  if (values.size() == 1) return std::vector<double>(static_cast<std::size_t>(channels), values[0]);
  throw UsageError("--" + flag + " has " + std::to_string(values.size()) + " values, expected 1 or " +
                   std::to_string(channels) + " (one per input channel)");
}

std::string join(const std::vector<double>& values) {
  std::ostringstream out;
  out << "(";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << (values.size() == 1 ? ",)" : ")");
  return out.str();
}

}  // namespace

DatasetDefaults dataset_defaults(const std::string& dataset_name) {
  DatasetDefaults defaults;
  if (is_fashion_mnist(dataset_name)) {
    // Mean and std of the Fashion-MNIST training images, in [0, 1].
    defaults.in_chans = 1;
    defaults.img_size = 28;
    defaults.mean = std::vector<double>{0.2860};
    defaults.std = std::vector<double>{0.3530};
  }
  return defaults;
}

int64_t resolve_in_chans(const Config& config, const DatasetDefaults& dataset) {
  if (auto chans = config.get_optional<int64_t>("in_chans")) return *chans;
  if (auto size = config.get_optional<std::vector<int64_t>>("input_size")) return size->at(0);
  return dataset.in_chans.value_or(3);
}

DataConfig resolve_data_config(const Config& config, const PretrainedCfg& pretrained, const DatasetDefaults& dataset,
                               bool use_test_size) {
  const bool test_size = use_test_size && pretrained.test_input_size.has_value();
  const std::vector<int64_t>& pretrained_size = test_size ? *pretrained.test_input_size : pretrained.input_size;
  const bool test_crop = use_test_size && pretrained.test_crop_pct.has_value();
  const double pretrained_crop = test_crop ? *pretrained.test_crop_pct : pretrained.crop_pct;
  DataConfig out;
  const int64_t chans = resolve_in_chans(config, dataset);
  if (auto size = config.get_optional<std::vector<int64_t>>("input_size")) {
    out.input_size = *size;
  } else if (auto img = config.get_optional<int64_t>("img_size")) {
    out.input_size = {chans, *img, *img};
  } else if (dataset.img_size) {
    out.input_size = {chans, *dataset.img_size, *dataset.img_size};
  } else {
    out.input_size = {chans, pretrained_size.at(1), pretrained_size.at(2)};
  }

  const auto interpolation = config.get_optional<std::string>("interpolation");
  out.interpolation = interpolation && !interpolation->empty() ? *interpolation : pretrained.interpolation;

  if (auto mean = config.get_optional<std::vector<double>>("mean")) {
    out.mean = per_channel(*mean, chans, "mean");
  } else {
    out.mean = adapt_to_channels(dataset.mean.value_or(pretrained.mean), chans);
  }
  if (auto std = config.get_optional<std::vector<double>>("std")) {
    out.std = per_channel(*std, chans, "std");
  } else {
    out.std = adapt_to_channels(dataset.std.value_or(pretrained.std), chans);
  }
  out.crop_pct = config.get_optional<double>("crop_pct").value_or(pretrained_crop);
  out.crop_mode = pretrained.crop_mode.empty() ? "center" : pretrained.crop_mode;
  return out;
}

std::vector<double> adapt_to_channels(const std::vector<double>& values, int64_t channels) {
  if (static_cast<int64_t>(values.size()) == channels) return values;
  double sum = 0.0;
  for (double v : values) sum += v;
  return std::vector<double>(static_cast<std::size_t>(channels), sum / static_cast<double>(values.size()));
}

TransformArgs eval_transform_args(const DataConfig& data) {
  TransformArgs args;
  args.is_training = false;
  args.input_size = data.input_size;
  args.interpolation = data.interpolation;
  args.mean = data.mean;
  args.std = data.std;
  args.crop_pct = data.crop_pct;
  args.crop_mode = data.crop_mode;
  return args;
}

std::vector<std::string> describe_data_config(const DataConfig& c) {
  std::ostringstream size;
  size << "(" << c.input_size[0] << ", " << c.input_size[1] << ", " << c.input_size[2] << ")";
  std::ostringstream crop;
  crop << c.crop_pct;
  return {"Data processing configuration for current model + dataset:",
          "\tinput_size: " + size.str(),
          "\tinterpolation: " + c.interpolation,
          "\tmean: " + join(c.mean),
          "\tstd: " + join(c.std),
          "\tcrop_pct: " + crop.str(),
          "\tcrop_mode: " + c.crop_mode};
}

}  // namespace timm
