#include "timm/train/metrics.hpp"

#include <algorithm>

#include <ATen/ATen.h>

namespace timm {

std::vector<int64_t> correct_topk(const at::Tensor& logits, const at::Tensor& target, const std::vector<int64_t>& ks) {
  const int64_t max_k = std::min<int64_t>(*std::max_element(ks.begin(), ks.end()), logits.size(1));
  const at::Tensor pred = std::get<1>(logits.topk(max_k, /*dim=*/1, /*largest=*/true, /*sorted=*/true));
  const at::Tensor hits = pred.eq(target.view({-1, 1}));
  std::vector<int64_t> counts;
  counts.reserve(ks.size());
  for (int64_t k : ks) {
    counts.push_back(hits.narrow(1, 0, std::min(k, max_k)).sum().item<int64_t>());
  }
  return counts;
}

}  // namespace timm
