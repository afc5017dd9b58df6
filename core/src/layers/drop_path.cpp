#include "timm/layers/drop_path.hpp"

#include <ostream>

#include "timm/base/error.hpp"

namespace timm::layers {

at::Tensor drop_path(const at::Tensor& x, double drop_prob, bool training, bool scale_by_keep) {
  if (drop_prob == 0.0 || !training) return x;
  const double keep_prob = 1.0 - drop_prob;
  std::vector<int64_t> mask_shape(x.dim(), 1);
  mask_shape[0] = x.size(0);
  at::Tensor mask = at::empty(mask_shape, x.options()).bernoulli_(keep_prob);
  if (keep_prob > 0.0 && scale_by_keep) mask.div_(keep_prob);
  return x * mask;
}

std::vector<double> drop_path_rates(double drop_path_rate, int64_t depth) {
  if (depth < 0) throw UsageError("drop_path_rates: depth must be >= 0, got " + std::to_string(depth));
  // Through a float32 linspace, as timm does, so the rates round the same way.
  const at::Tensor rates = at::linspace(0.0, drop_path_rate, depth, at::kFloat).to(at::kDouble);
  return std::vector<double>(rates.data_ptr<double>(), rates.data_ptr<double>() + depth);
}

DropPathImpl::DropPathImpl(const DropPathOptions& options_) : options(options_) {
  if (options.drop_prob() < 0.0 || options.drop_prob() > 1.0) {
    throw UsageError("DropPath: drop_prob must be in [0, 1], got " + std::to_string(options.drop_prob()));
  }
}

void DropPathImpl::pretty_print(std::ostream& stream) const {
  stream << "timm::layers::DropPath(drop_prob=" << options.drop_prob() << ")";
}

at::Tensor DropPathImpl::forward(const at::Tensor& x) {
  return drop_path(x, options.drop_prob(), is_training(), options.scale_by_keep());
}

}  // namespace timm::layers
