// timm's JsdCrossEntropy against timm at test time: loss and gradient on
// random logits, with and without label smoothing, with the mixture clamp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/train/jsd_loss.hpp"

namespace test_jsd_loss {

using namespace timm;

namespace {

at::Tensor read_tensor(const std::filesystem::path& path, std::vector<int64_t> sizes, at::ScalarType dtype) {
  const std::vector<std::uint8_t> bytes = test::read_bytes(path);
  at::Tensor t = at::empty(sizes, dtype);
  REQUIRE(static_cast<std::size_t>(t.nbytes()) == bytes.size());
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

}  // namespace

TEST_CASE("jsd_cross_entropy: loss and gradient equal timm's JsdCrossEntropy") {
  at::set_num_threads(1);  // summation order
  test::TempDir dir;
  test::run_oracle("aug_oracle.py", {"jsd", dir.path().string()});
  std::ifstream manifest(dir / "manifest.txt");
  std::string line;
  int cases = 0;
  double worst_loss = 0, worst_grad = 0;
  while (std::getline(manifest, line)) {
    std::istringstream f(line);
    int k;
    int64_t n, c, splits;
    double alpha, smoothing, want;
    f >> k >> n >> c >> splits >> alpha >> smoothing >> want;
    const std::string id = std::to_string(k);
    at::Tensor logits = read_tensor(dir / ("logits_" + id + ".f32"), {n, c}, at::kFloat).requires_grad_();
    const at::Tensor target = read_tensor(dir / ("target_" + id + ".i64"), {n}, at::kLong);
    const at::Tensor want_grad = read_tensor(dir / ("grad_" + id + ".f32"), {n, c}, at::kFloat);
    const at::Tensor loss = jsd_cross_entropy(logits, target, splits, alpha, smoothing);
    loss.backward();
    const double loss_diff = std::fabs(loss.item<double>() - want) / std::max(1.0, std::fabs(want));
    const double grad_diff = (logits.grad() - want_grad).abs().max().item<double>();
    // float32 maths in both; the order of a few reductions may differ.
    CHECK_MESSAGE(loss_diff < 1e-6, line << ": loss " << loss.item<double>());
    CHECK_MESSAGE(grad_diff < 1e-6, line << ": gradient max difference " << grad_diff);
    worst_loss = test::worst_diff(worst_loss, loss_diff);
    worst_grad = test::worst_diff(worst_grad, grad_diff);
    ++cases;
  }
  CHECK(cases == 4);
  MESSAGE("JSD loss vs timm: " << cases << " cases, loss rel. difference " << worst_loss << ", gradient max difference "
                               << worst_grad);
}

TEST_CASE("jsd_cross_entropy refuses a batch that does not split evenly") {
  const at::Tensor logits = at::zeros({7, 3});
  const at::Tensor target = at::zeros({7}, at::kLong);
  CHECK_THROWS_AS(jsd_cross_entropy(logits, target, 3), Error);
}

}  // namespace test_jsd_loss
