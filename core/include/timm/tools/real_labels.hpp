// timm's RealLabelsImagenet (validate.py --real-labels): the reassessed
// labels of the ImageNet validation set ("Are we done with ImageNet?",
// Beyer et al. 2020), scored as timm scores them.
//
//   timm::RealLabels real("real.json", filenames);
//   real.add_result(logits);  // batch after batch, in dataset order
//   double top1 = real.accuracy(1);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace timm {

class RealLabels {
 public:
  // `json_file`: a JSON list whose entry i holds the labels of
  // ILSVRC2012_val_<i + 1 in 8 digits>.JPEG; `filenames`: the dataset's
  // samples in order, looked up by base name. Throws UsageError naming the
  // file for one that is not such a list, a count of entries other than the
  // samples' (timm asserts it), or a sample not named so.
  RealLabels(const std::filesystem::path& json_file, const std::vector<std::string>& filenames);

  // The logits (N, classes) of the next N samples: each sample with real
  // labels counts as a top-k hit when any of its k best classes is one of
  // them; a sample without real labels is left out, as timm's.
  void add_result(const at::Tensor& output);

  // Top-k accuracy in percent (k is 1 or 5) over the samples counted so
  // far; throws Error when none had real labels (timm's mean of nothing).
  double accuracy(int64_t k) const;

 private:
  std::filesystem::path file_;
  std::vector<std::vector<int64_t>> labels_;  // per sample, in dataset order
  std::size_t next_ = 0;
  int64_t counted_ = 0, top1_ = 0, top5_ = 0;
};

}  // namespace timm
