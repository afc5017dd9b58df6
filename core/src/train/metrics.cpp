#include "timm/train/metrics.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"

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

TtaReduced reduce_tta(const at::Tensor& output, const at::Tensor& target, int64_t factor) {
  TORCH_CHECK(factor >= 2 && output.dim() >= 1 && target.dim() == 1 && target.size(0) == output.size(0),
              "reduce_tta: factor ", factor, ", output ", output.sizes(), ", target ", target.sizes());
  const int64_t n = output.size(0);
  if (n % factor != 0) {
    const std::string tta = std::to_string(factor);
    throw Error("--tta " + tta + ": a validation batch of " + std::to_string(n) + " samples is not a multiple of " +
                tta + " (each " + tta + " consecutive outputs are averaged into one; timm fails here with a size " +
                "mismatch): give a validation batch size and a validation set per process that are multiples of " +
                tta);
  }
  // unfold puts each group of `factor` rows in a new last dimension; timm's
  // mean(dim=2) is that dimension for (B, C) logits, mean(-1) for any shape.
  return {output.unfold(0, factor, factor).mean(-1), target.slice(0, 0, n, factor)};
}

}  // namespace timm
