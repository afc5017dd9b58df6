#include "timm/tools/real_labels.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"

namespace timm {
namespace {

// The JSON list of label lists; UsageError naming `file` otherwise.
std::vector<std::vector<int64_t>> read_real_labels(const std::filesystem::path& file) {
  const std::string where = "--real-labels " + in_quotes(file.string());
  std::ifstream in(file);
  if (!in) throw UsageError(where + ": cannot open the file");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(where + ": not JSON (" + e.what() + ")");
  }
  if (!json.is_array()) throw UsageError(where + ": expected a list of label lists");
  std::vector<std::vector<int64_t>> labels;
  for (const auto& entry : json) {
    if (!entry.is_array() ||
        !std::all_of(entry.begin(), entry.end(), [](const auto& v) { return v.is_number_integer(); })) {
      throw UsageError(where + ": entry " + std::to_string(labels.size()) + " is not a list of class indices");
    }
    labels.push_back(entry.get<std::vector<int64_t>>());
  }
  return labels;
}

// timm's key of entry i: ILSVRC2012_val_<i + 1 in 8 digits>.JPEG.
std::string imagenet_val_name(std::size_t i) {
  char name[40];
  std::snprintf(name, sizeof(name), "ILSVRC2012_val_%08zu.JPEG", i + 1);
  return name;
}

}  // namespace

RealLabels::RealLabels(const std::filesystem::path& json_file, const std::vector<std::string>& filenames)
    : file_(json_file) {
  const std::vector<std::vector<int64_t>> by_entry = read_real_labels(json_file);
  if (by_entry.size() != filenames.size()) {
    throw UsageError("--real-labels " + in_quotes(json_file.string()) + ": " + std::to_string(by_entry.size()) +
                     " entries for a dataset of " + std::to_string(filenames.size()) +
                     " samples (the whole ImageNet validation set)");
  }
  std::map<std::string, std::size_t> entry_of;
  for (std::size_t i = 0; i < by_entry.size(); ++i) entry_of.emplace(imagenet_val_name(i), i);
  for (const std::string& filename : filenames) {
    const std::string base = std::filesystem::path(filename).filename().string();
    const auto it = entry_of.find(base);
    if (it == entry_of.end()) {
      throw UsageError("--real-labels " + in_quotes(json_file.string()) + ": sample " + in_quotes(filename) +
                       " is not an ImageNet validation image of the list (ILSVRC2012_val_<index>.JPEG)");
    }
    labels_.push_back(by_entry[it->second]);
  }
}

void RealLabels::add_result(const at::Tensor& output) {
  const int64_t k = std::min<int64_t>(5, output.size(1));
  const at::Tensor pred = std::get<1>(output.topk(k, 1, /*largest=*/true, /*sorted=*/true)).to(at::kCPU).contiguous();
  const int64_t* p = pred.data_ptr<int64_t>();
  for (int64_t row = 0; row < pred.size(0); ++row, ++next_) {
    if (next_ >= labels_.size()) throw Error("--real-labels: more results than samples");
    const std::vector<int64_t>& real = labels_[next_];
    if (real.empty()) continue;
    const auto is_real = [&](int64_t cls) { return std::find(real.begin(), real.end(), cls) != real.end(); };
    const int64_t* top = p + row * k;
    ++counted_;
    top1_ += is_real(top[0]) ? 1 : 0;
    top5_ += std::any_of(top, top + k, is_real) ? 1 : 0;
  }
}

double RealLabels::accuracy(int64_t k) const {
  if (k != 1 && k != 5) throw Error("RealLabels::accuracy: k is 1 or 5, got " + std::to_string(k));
  if (counted_ == 0) {
    throw Error("--real-labels " + in_quotes(file_.string()) + ": no sample validated has real labels");
  }
  return 100.0 * static_cast<double>(k == 1 ? top1_ : top5_) / static_cast<double>(counted_);
}

}  // namespace timm
