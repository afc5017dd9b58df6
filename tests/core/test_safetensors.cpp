// The safetensors reader and writer: round trips of every dtype, and each kind
// of malformed file giving a clear timm::Error (never a crash or a read out of
// bounds). Also state_dict / load_state_dict on a small module.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/state_dict.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_safetensors {

namespace {

using timm::test::TempDir;

// A file made of the 8-byte length, `header` and `data`, with `declared` as
// the length field (default: the header's real length).
void write_raw(const std::filesystem::path& path, const std::string& header, const std::string& data,
               std::optional<uint64_t> declared = std::nullopt) {
  const uint64_t n = declared.value_or(header.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

std::string read_error(const std::filesystem::path& path) {
  try {
    timm::read_safetensors(path);
  } catch (const timm::Error& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("safetensors round trip keeps every dtype, shape, value and the metadata") {
  TempDir dir;
  const timm::NamedTensors tensors = {
      {"f32", at::randn({3, 4})},
      {"f64", at::randn({2}, at::kDouble)},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"bf16", at::randn({2, 2}).to(at::kBFloat16)},
      {"i64", at::arange(7, at::kLong) - 3},
      {"i32", at::arange(6, at::kInt).reshape({2, 3})},
      {"i16", at::arange(4, at::kShort) * -100},
      {"i8", at::arange(-4, 4, at::kChar)},
      {"u8", at::arange(250, 256, at::kInt).to(at::kByte)},
      {"bool", at::tensor({1, 0, 1}).to(at::kBool)},
      {"scalar", at::scalar_tensor(7, at::kLong)},  // 0-dim, like num_batches_tracked
      {"empty", at::zeros({0, 3})},
      {"strided", at::randn({4, 6}).t()},  // non-contiguous input
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"epoch", "3"}};
  const auto path = dir / "all.safetensors";
  timm::write_safetensors(path, tensors, metadata);

  const timm::SafetensorsFile file = timm::read_safetensors_file(path);
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == tensors.size());
  const std::map<std::string, at::Tensor> read(file.tensors.begin(), file.tensors.end());
  for (const auto& [name, original] : tensors) {
    CAPTURE(name);
    REQUIRE(read.count(name) == 1);
    const at::Tensor& t = read.at(name);
    CHECK((t.scalar_type() == original.scalar_type()));
    CHECK((t.sizes() == original.sizes()));
    CHECK(at::equal(t, original));
  }
  // Data is laid out largest element first, so every tensor is aligned.
  CHECK(file.tensors.front().second.element_size() == 8);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);  // no temp file left
}

TEST_CASE("safetensors written here read in Python's safetensors, and Python's read here") {
  TempDir dir;
  const auto ours = dir / "ours.safetensors";
  timm::write_safetensors(
      ours, {{"w", at::arange(6, at::kFloat).reshape({2, 3})}, {"n", at::scalar_tensor(5, at::kLong)}}, {{"k", "v"}});
  const std::string script =
      "import sys, torch\n"
      "from safetensors import safe_open\n"
      "from safetensors.torch import load_file, save_file\n"
      "d = load_file(sys.argv[1])\n"
      "assert torch.equal(d['w'], torch.arange(6.).reshape(2, 3)), d\n"
      "assert d['n'].item() == 5 and d['n'].dim() == 0\n"
      "assert safe_open(sys.argv[1], 'pt').metadata() == {'k': 'v'}\n"
      "save_file({'b': torch.tensor([1.5, -2.0], dtype=torch.bfloat16), 'z': torch.zeros(2, 0)}, sys.argv[2], "
      "metadata={'m': '1'})\n";
  const auto theirs = dir / "theirs.safetensors";
  const auto result = timm::test::run_command({timm::test::python(), "-c", script, ours.string(), theirs.string()});
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const timm::SafetensorsFile file = timm::read_safetensors_file(theirs);
  CHECK(file.metadata.at("m") == "1");
  const std::map<std::string, at::Tensor> read(file.tensors.begin(), file.tensors.end());
  CHECK(at::equal(read.at("b"), at::tensor({1.5, -2.0}).to(at::kBFloat16)));
  CHECK((read.at("z").sizes() == at::IntArrayRef{2, 0}));
}

TEST_CASE("safetensors writer is atomic and refuses what the format cannot hold") {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  timm::write_safetensors(path, {{"a", at::ones({2})}});
  CHECK_THROWS_WITH_AS(timm::write_safetensors(path, {{"a", at::ones({2})}, {"a", at::ones({1})}}),
                       doctest::Contains("'a' is given twice"), timm::Error);
  CHECK_THROWS_WITH_AS(timm::write_safetensors(path, {{"c", at::ones({2}, at::kComplexFloat)}}),
                       doctest::Contains("'c' has dtype ComplexFloat"), timm::Error);
  CHECK_THROWS_WITH_AS(timm::write_safetensors(path, {{"__metadata__", at::ones({1})}}), doctest::Contains("reserved"),
                       timm::Error);
  CHECK_THROWS_AS(timm::write_safetensors(dir / "missing-folder" / "x.safetensors", {{"a", at::ones({1})}}),
                  timm::Error);
  // The earlier file is intact and no temporary file was left behind.
  CHECK(at::equal(timm::read_safetensors(path).at(0).second, at::ones({2})));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
}

TEST_CASE("safetensors reader rejects malformed files with a clear error") {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  const std::string eight_bytes(8, '\0');
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  SUBCASE("missing file") { CHECK(contains(read_error(dir / "nope.safetensors"), "cannot open")); }
  SUBCASE("shorter than the length field") {
    std::ofstream(path, std::ios::binary) << "abc";
    const auto e = read_error(path);
    CHECK(contains(e, path.string()));
    CHECK(contains(e, "shorter than the 8-byte header length"));
  }
  SUBCASE("header length beyond the file") {
    write_raw(path, good_header, eight_bytes, good_header.size() + 100);
    CHECK(contains(read_error(path), "runs past the end of the file"));
  }
  SUBCASE("absurd header length") {
    write_raw(path, good_header, eight_bytes, UINT64_MAX);
    CHECK(contains(read_error(path), "exceeds the limit"));
  }
  SUBCASE("truncated data") {
    write_raw(path, good_header, eight_bytes.substr(0, 5));
    CHECK(contains(read_error(path), "run past the end of the data"));
  }
  SUBCASE("JSON that is not an object") {
    write_raw(path, "[1, 2]", "");
    CHECK(contains(read_error(path), "not a JSON object"));
  }
  SUBCASE("unknown dtype") {
    write_raw(path, R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", eight_bytes);
    const auto e = read_error(path);
    CHECK(contains(e, "tensor 'a': unknown dtype 'F31'"));
    CHECK(contains(e, "BF16"));
  }
  // Headers over the eight data bytes, each wrong in one way, and the error
  // each gives.
  struct BadHeader {
    const char* what;
    const char* header;
    const char* error;
  };
  const BadHeader bad_headers[] = {
      {"bad JSON", R"({"a":{"dtype":"F32",)", "not valid JSON"},
      {"offsets out of bounds", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "tensor 'a': data_offsets [8, 16) run past the end of the data (8 bytes)"},
      {"offsets reversed", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", "end before they begin"},
      {"shape disagrees with the byte span", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       "shape [3] of F32 needs 12 bytes but data_offsets [0, 8) span 8"},
      {"shape overflows", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", "too large"},
      {"negative dimension", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       "not a non-negative integer"},
      {"overlapping tensors",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "tensor 'b' (bytes [4, 8)) overlaps tensor 'a' (bytes [0, 8))"},
      {"a gap in the data", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "bytes [0, 4) of the data belong to no tensor"},
      {"trailing bytes", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "4 bytes at the end of the data belong to no tensor"},
      {"duplicate key",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "has the key 'a' twice"},
      {"missing field", R"({"a":{"dtype":"F32","shape":[2]}})", "tensor 'a': missing 'data_offsets'"},
  };
  for (const BadHeader& bad : bad_headers) {
    SUBCASE(bad.what) {
      write_raw(path, bad.header, eight_bytes);
      CHECK(contains(read_error(path), bad.error));
    }
  }
  SUBCASE("metadata that is not strings") {
    write_raw(path, R"({"__metadata__":{"epoch":3}})", "");
    CHECK(contains(read_error(path), "'__metadata__' entry 'epoch' is not a string"));
  }
  SUBCASE("BOOL bytes other than 0 and 1") {
    write_raw(path, R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2));
    CHECK(contains(read_error(path), "BOOL data"));
  }
  SUBCASE("every truncation of a valid file is an error, never a crash") {
    const auto good = dir / "good.safetensors";
    timm::write_safetensors(good, {{"x", at::randn({3})}, {"n", at::scalar_tensor(1, at::kLong)}});
    const std::string bytes = timm::test::read_file(good);
    for (size_t size = 0; size < bytes.size(); ++size) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, size);
      CHECK_THROWS_AS(timm::read_safetensors(path), timm::Error);
    }
  }
}

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 1).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(3));
    head = register_module("head", torch::nn::Sequential(torch::nn::Linear(3, 2)));
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Sequential head{nullptr};
};

std::vector<std::string> keys_of(const timm::NamedTensors& tensors) {
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : tensors) keys.push_back(key);
  return keys;
}

}  // namespace

TEST_CASE("state_dict lists parameters then buffers per module, in Python's order") {
  NetImpl net;  // not held by a shared_ptr: state_dict must not need one
  CHECK(keys_of(timm::state_dict(net)) ==
        std::vector<std::string>{"conv.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                 "bn.num_batches_tracked", "head.0.weight", "head.0.bias"});
}

TEST_CASE("load_state_dict copies values, converts dtype, and checks everything first") {
  NetImpl source, target;
  at::NoGradGuard no_grad;
  source.bn->running_mean.fill_(0.5);
  source.bn->num_batches_tracked.fill_(9);
  timm::NamedTensors state = timm::state_dict(source);
  state[0].second = state[0].second.to(at::kDouble);  // dtype converted on copy, as Tensor::copy_
  auto result = timm::load_state_dict(target, state);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  CHECK(at::equal(target.conv->weight, source.conv->weight));
  CHECK(target.bn->num_batches_tracked.item<int64_t>() == 9);
  CHECK(target.conv->weight.requires_grad());

  // A failing load changes nothing, and names every problem at once.
  NetImpl fresh;
  const at::Tensor before = fresh.conv->weight.clone();
  timm::NamedTensors bad = timm::state_dict(source);
  bad.erase(bad.begin() + 1);                   // bn.weight missing
  bad.erase(bad.begin() + 1);                   // bn.bias missing
  bad.emplace_back("extra", at::zeros({1}));    // unexpected
  bad[bad.size() - 2].second = at::zeros({5});  // head.0.bias mis-shaped
  try {
    timm::load_state_dict(fresh, bad);
    FAIL("expected an error");
  } catch (const timm::Error& e) {
    const std::string message = e.what();
    CHECK(contains(message, "size mismatch for 'head.0.bias': checkpoint has [5], model has [2]"));
    CHECK(contains(message, "missing keys (2): 'bn.weight', 'bn.bias'"));
    CHECK(contains(message, "unexpected keys (1): 'extra'"));
  }
  CHECK(at::equal(fresh.conv->weight, before));

  timm::NamedTensors twice = timm::state_dict(source);
  twice.push_back(twice.front());
  CHECK_THROWS_WITH_AS(timm::load_state_dict(fresh, twice), doctest::Contains("given twice: 'conv.weight'"),
                       timm::Error);
}

}  // namespace test_safetensors
