// timm-logits end to end against Python timm (tests/oracle/logits_oracle.py):
// the same weights (.pth and .safetensors) and input (tensor files, image
// folders) give timm's logits. Tolerance |ours - timm| <= atol + rtol * |timm|
// with rtol 1e-4 and atol 1e-4 for tensor inputs and images timm's eval resize
// leaves alone (256 px for regnetx_002's crop_pct 0.875), atol 1e-3 for images
// that are resized (bicubic resampling rounds to 8 bits and may differ from
// PIL's by one level on some pixels).
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/io/npy.hpp"
#include "timm/io/safetensors.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_timm_logits {

namespace {

using timm::test::run_command;

constexpr double kRtol = 1e-4;

std::string tool() { return (timm::test::bin_dir() / "timm-logits").string(); }

at::Tensor tensor_in(const std::filesystem::path& file, const std::string& key) {
  for (const auto& [name, t] : timm::read_safetensors(file)) {
    if (name == key) return t;
  }
  FAIL("no " << key << " in " << file);
  return {};
}

void check_close(const at::Tensor& ours, const at::Tensor& theirs, double atol, const std::string& what) {
  REQUIRE(ours.sizes() == theirs.sizes());
  MESSAGE(what << ": max abs diff " << (ours - theirs).abs().max().item<double>() << " (atol " << atol
               << ", rtol " << kRtol << "; max |value| " << theirs.abs().max().item<double>() << ")");
  CHECK_MESSAGE(at::allclose(ours, theirs, kRtol, atol), what);
}

// The CSV's values, rows in order, without the name column.
at::Tensor read_csv_values(const std::filesystem::path& file, std::vector<std::string>& names) {
  std::istringstream in(timm::test::read_file(file));
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> values;
  int64_t rows = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field;
    std::getline(fields, field, ',');
    names.push_back(field);
    while (std::getline(fields, field, ',')) values.push_back(std::stod(field));
    ++rows;
  }
  return at::tensor(values, at::kDouble).reshape({rows, -1}).to(at::kFloat);
}

}  // namespace

TEST_CASE("timm-logits writes Python timm's logits for the same weights and input") {
  timm::test::TempDir dir;
  MESSAGE(timm::test::run_oracle("logits_oracle.py", {"write", "--dir", dir.path().string()}));
  const auto expected = dir / "expected.safetensors";
  struct Case {
    std::string weights, input, output, expected_key;
    double atol;
  };
  const std::vector<Case> cases = {
      {"weights.pth", "input.npy", "a.safetensors", "logits_tensor", 1e-4},
      {"weights.safetensors", "input.safetensors", "b.npy", "logits_tensor", 1e-4},
      {"weights.pth", "images_exact", "c.safetensors", "logits_exact", 1e-4},
      {"weights.safetensors", "images_resized", "d.safetensors", "logits_resized", 1e-3},
  };
  for (const auto& c : cases) {
    CAPTURE(c.input);
    const auto r = run_command(
        {tool(), "--model", "regnetx_002", "--weights", (dir / c.weights).string(), "--input", (dir / c.input).string(),
         "--output", (dir / c.output).string(), "--csv", (dir / (c.output + ".csv")).string(), "--batch-size", "2"},
        std::chrono::seconds(300), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const at::Tensor ours =
        c.output.ends_with(".npy") ? timm::read_npy(dir / c.output) : tensor_in(dir / c.output, "logits");
    const at::Tensor theirs = tensor_in(expected, c.expected_key);
    check_close(ours, theirs, c.atol, c.weights + " + " + c.input);
    std::vector<std::string> names;
    check_close(read_csv_values(dir / (c.output + ".csv"), names), theirs, c.atol, "CSV of " + c.input);
    if (c.input == "images_exact") CHECK(names == std::vector<std::string>{"img0.png", "img1.png"});
    if (c.input == "input.npy") CHECK(names == std::vector<std::string>{"0", "1", "2"});
  }
}

TEST_CASE("timm-logits --features writes Python timm's forward_intermediates per level") {
  timm::test::TempDir dir;
  MESSAGE(timm::test::run_oracle("logits_oracle.py", {"write", "--dir", dir.path().string()}));
  const auto expected = dir / "expected.safetensors";
  const std::vector<std::string> base = {tool(),
                                         "--model",
                                         "regnetx_002",
                                         "--weights",
                                         (dir / "weights.safetensors").string(),
                                         "--input",
                                         (dir / "input.npy").string(),
                                         "--batch-size",
                                         "2",
                                         "--features"};
  struct Case {
    std::vector<std::string> flags;
    std::string expected_prefix;
    std::vector<int64_t> levels;  // the levels written, in order
  };
  const std::vector<Case> cases = {
      {{}, "features_all", {0, 1, 2, 3, 4}},
      {{"--feature-indices", "-1", "1", "--feature-norm"}, "features_sel", {1, 4}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.expected_prefix);
    std::vector<std::string> command = base;
    command.insert(command.end(), c.flags.begin(), c.flags.end());
    const auto output = dir / (c.expected_prefix + ".safetensors");
    command.insert(command.end(), {"--output", output.string()});
    const auto r = run_command(command, std::chrono::seconds(300), {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const timm::SafetensorsFile file = timm::read_safetensors_file(output);
    REQUIRE(file.tensors.size() == c.levels.size());
    for (size_t i = 0; i < c.levels.size(); ++i) {
      const std::string key = "features." + std::to_string(c.levels[i]);
      CHECK(file.tensors[i].first == key);
      check_close(file.tensors[i].second, tensor_in(expected, c.expected_prefix + "." + std::to_string(i)), 1e-4, key);
      CHECK(file.metadata.contains(key + ".num_chs"));
      CHECK(std::stoll(file.metadata.at(key + ".num_chs")) == file.tensors[i].second.size(1));
    }
    // regnetx_002's feature_info as timm's: the stem at stride 2, s4 at 32.
    if (c.levels.front() == 0) CHECK(file.metadata.at("features.0.module") == "stem");
    CHECK(file.metadata.at("features.4.module") == "s4");
    CHECK(file.metadata.at("features.4.reduction") == "32");
  }

  // Refused: a layout the model lacks, a level out of range, .npy output, the flags without --features.
  auto refused = [&](std::vector<std::string> extra, const std::string& message) {
    CAPTURE(message);
    std::vector<std::string> command = base;
    command.insert(command.end(), extra.begin(), extra.end());
    const auto r = run_command(command, std::chrono::seconds(300));
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.output.find(message) != std::string::npos, r.output);
    CHECK_FALSE(std::filesystem::exists(dir / "refused.safetensors"));
  };
  const std::string out = (dir / "refused.safetensors").string();
  refused({"--feature-fmt", "NLC", "--output", out}, "output_fmt must be NCHW, got 'NLC'");
  refused({"--feature-indices", "5", "--output", out}, "feature index 5 is out of range (0 to 4)");
  refused({"--feature-indices", "x", "--output", out}, "--feature-indices 'x': expected an integer");
  refused({"--output", (dir / "f.npy").string()}, "expected a .safetensors file name");
  refused({"--output", out, "--csv", (dir / "f.csv").string()}, "--csv writes logits");
  const auto without = run_command(
      {tool(), "--model", "regnetx_002", "--weights", "w.pth", "--input", "x.npy", "--output", out, "--feature-norm"});
  CHECK(without.exit_code == 2);
  CHECK(without.output.find("--feature-norm needs --features") != std::string::npos);
}

TEST_CASE("timm-logits reports bad input with exit code 2 (usage) or 1 (files)") {
  timm::test::TempDir dir;
  const auto missing = run_command({tool(), "--model", "regnetx_002"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.output.find("--weights is required") != std::string::npos);

  const auto suffix =
      run_command({tool(), "--model", "regnetx_002", "--weights", "w.pth", "--input", "x.npy", "--output", "out.txt"});
  CHECK(suffix.exit_code == 2);
  CHECK(suffix.output.find("expected a .safetensors or .npy file name") != std::string::npos);

  const auto no_file = run_command({tool(), "--model", "regnetx_002", "--weights", (dir / "none.pth").string(),
                                    "--input", "x.npy", "--output", (dir / "o.npy").string()});
  CHECK(no_file.exit_code == 1);
  CHECK(no_file.output.find("none.pth") != std::string::npos);

  // An empty weights file: strict loading lists every missing key.
  timm::write_npy(dir / "x.npy", at::zeros({2, 1, 32, 32}));
  timm::write_safetensors(dir / "w.safetensors", {});
  const auto chans = run_command({tool(), "--model", "regnetx_002", "--weights", (dir / "w.safetensors").string(),
                                  "--input", (dir / "x.npy").string(), "--output", (dir / "o.npy").string()});
  CHECK(chans.exit_code == 1);
  CHECK(chans.output.find("missing keys") != std::string::npos);

  const auto help = run_command({tool(), "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("usage: timm-logits") != std::string::npos);
}

TEST_CASE("npy round trip and malformed npy files") {
  timm::test::TempDir dir;
  const at::Tensor t = at::randn({2, 3, 4});
  timm::write_npy(dir / "t.npy", t);
  CHECK(at::equal(timm::read_npy(dir / "t.npy"), t));
  const at::Tensor l = at::arange(5, at::kLong);
  timm::write_npy(dir / "l.npy", l);
  CHECK(at::equal(timm::read_npy(dir / "l.npy"), l));
  timm::write_file_atomically(dir / "bad.npy", "not numpy");
  CHECK_THROWS_WITH_AS(timm::read_npy(dir / "bad.npy"), doctest::Contains("bad magic"), timm::Error);
  std::string bytes = timm::test::read_file(dir / "t.npy");
  timm::write_file_atomically(dir / "short.npy", bytes.substr(0, bytes.size() - 4));
  CHECK_THROWS_WITH_AS(timm::read_npy(dir / "short.npy"), doctest::Contains("needs 96"), timm::Error);
}

namespace {

// A version 1.0 .npy file with `header` as its dict and `payload` bytes after it.
std::string npy_with_header(const std::string& header, size_t payload) {
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + std::string(payload, '\0');
}

}  // namespace

TEST_CASE("hostile npy headers fail naming the problem, before any allocation") {
  timm::test::TempDir dir;
  const auto read = [&](const std::string& header, size_t payload) {
    timm::write_file_atomically(dir / "h.npy", npy_with_header(header, payload));
    return timm::read_npy(dir / "h.npy");
  };
  CHECK(at::equal(read("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24), at::zeros({2, 3})));
  CHECK(read("{\"descr\":'<i8','fortran_order':False,'shape':()}", 8).dim() == 0);
  // 2^40 x 2^10 float32 (4 PiB): refused from the file size, never allocated.
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1024), }", 8),
                       doctest::Contains("needs 4503599627370496"), timm::Error);
  // 2^40 x 2^30 elements overflow int64: a bad shape.
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1073741824), }", 8),
                       doctest::Contains("bad shape"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8),
                       doctest::Contains("bad shape"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 8),
                       doctest::Contains("bad shape"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': 6, }", 8),
                       doctest::Contains("expected a tuple"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, }", 8), doctest::Contains("no valid 'shape'"),
                       timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8),
                       doctest::Contains("no valid 'shape'"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8),
                       doctest::Contains("unsupported dtype"), timm::Error);
  CHECK_THROWS_WITH_AS(read("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8),
                       doctest::Contains("Fortran-order"), timm::Error);
}

}  // namespace test_timm_logits
