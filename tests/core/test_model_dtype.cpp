// --model-dtype's parts: to_model_dtype converts a model as Python's
// model.to(dtype=...) does (floating parameters and buffers only, the same
// tensor objects), and the flag's rules (train.py's choices, AMP with float32
// weights only) are usage errors naming what was wrong.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/models/model.hpp"
#include "timm/models/model_dtype.hpp"
#include "timm/models/state_dict.hpp"
#include "timm/train/amp.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_model_dtype {

namespace {

timm::ModelPtr make_resnet18() {
  timm::test::load_builtin_plugins();
  timm::ModelArgs args;
  args.num_classes = 10;
  args.in_chans = 1;
  return timm::create_model("resnet18", args);
}

// A dtype as the flags name it, so that checks print it.
std::string dtype_of(const at::Tensor& t) { return timm::dtype_name(t.scalar_type()); }

}  // namespace

TEST_CASE("to_model_dtype converts floating parameters and buffers as Python's model.to(dtype), in place") {
  timm::test::ThreadCount threads(1);
  timm::ModelPtr model = make_resnet18();
  const timm::NamedTensors before = timm::state_dict(*model);
  std::vector<at::Tensor> float_copies;
  for (const auto& [name, tensor] : before) float_copies.push_back(tensor.detach().clone());
  std::vector<const c10::TensorImpl*> impls;
  for (const auto& p : model->parameters()) impls.push_back(p.unsafeGetTensorImpl());
  // A gradient converts with its parameter.
  model->parameters().front().mutable_grad() = at::ones_like(model->parameters().front());

  timm::to_model_dtype(*model, at::kBFloat16);

  const timm::NamedTensors after = timm::state_dict(*model);
  REQUIRE(after.size() == before.size());
  int64_t integer_buffers = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    const auto& [name, tensor] = after[i];
    if (float_copies[i].is_floating_point()) {
      CHECK_MESSAGE(dtype_of(tensor) == "bfloat16", name);
      // The float32 values rounded to bfloat16, nothing else.
      CHECK_MESSAGE(at::equal(tensor, float_copies[i].to(at::kBFloat16)), name);
    } else {
      // num_batches_tracked stays int64 (C++'s Module::to(dtype) would convert it).
      CHECK_MESSAGE(dtype_of(tensor) == dtype_of(float_copies[i]), name);
      CHECK_MESSAGE(at::equal(tensor, float_copies[i]), name);
      ++integer_buffers;
    }
  }
  CHECK(integer_buffers > 0);
  // The same parameter objects: an optimizer holding them sees the new data.
  const auto params = model->parameters();
  REQUIRE(params.size() == impls.size());
  for (std::size_t i = 0; i < params.size(); ++i) CHECK(params[i].unsafeGetTensorImpl() == impls[i]);
  CHECK(dtype_of(params.front().grad()) == "bfloat16");

  // The model runs in bfloat16 end to end, forward and backward.
  model->train();
  const at::Tensor logits = model->forward(at::randn({4, 1, 28, 28}).to(at::kBFloat16));
  CHECK(dtype_of(logits) == "bfloat16");
  const at::Tensor loss = at::cross_entropy_loss(logits, at::tensor(std::vector<int64_t>{0, 1, 2, 3}));
  CHECK(dtype_of(loss) == "bfloat16");
  loss.backward();
  CHECK(std::isfinite(loss.item<double>()));
  for (const auto& p : model->named_parameters()) {
    REQUIRE_MESSAGE(p.value().grad().defined(), p.key());
    CHECK_MESSAGE(dtype_of(p.value().grad()) == "bfloat16", p.key());
  }

  // Back to float32: every floating tensor converts again, integer ones stay.
  timm::to_model_dtype(*model, at::kFloat);
  for (const auto& [name, tensor] : timm::state_dict(*model)) {
    if (tensor.is_floating_point()) CHECK_MESSAGE(dtype_of(tensor) == "float32", name);
  }
}

TEST_CASE("--model-dtype takes train.py's choices; --amp needs float32 weights") {
  CHECK((timm::parse_model_dtype("float32") == at::kFloat));
  CHECK((timm::parse_model_dtype("float16") == at::kHalf));
  CHECK((timm::parse_model_dtype("bfloat16") == at::kBFloat16));
  CHECK_THROWS_AS(timm::parse_model_dtype("float64"), timm::UsageError);
  CHECK_THROWS_WITH(timm::parse_model_dtype("fp16"),
                    doctest::Contains("--model-dtype 'fp16': expected float32, float16 or bfloat16"));

  CHECK_NOTHROW(timm::check_amp_model_dtype(true, at::kFloat));
  CHECK_NOTHROW(timm::check_amp_model_dtype(false, at::kBFloat16));
  CHECK_THROWS_AS(timm::check_amp_model_dtype(true, at::kBFloat16), timm::UsageError);
  CHECK_THROWS_WITH(timm::check_amp_model_dtype(true, at::kHalf),
                    doctest::Contains("--amp with --model-dtype float16: float32 model dtype must be used with AMP"));

  CHECK(timm::dtype_name(at::kFloat) == "float32");
  CHECK(timm::dtype_name(at::kHalf) == "float16");
  CHECK(timm::dtype_name(at::kBFloat16) == "bfloat16");
  CHECK(timm::dtype_name(at::kLong) == "int64");
}

}  // namespace test_model_dtype
