// The TensorBoard event writer (--log-tensorboard) against tensorboard's own
// reader, CRC-32C against known vectors and tensorboard's implementation, and
// the terminal status line's text.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/log/tensorboard.hpp"
#include "timm/train/train_status.hpp"

#include <doctest/doctest.h>

namespace test_tensorboard {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The JSON after `marker` on the oracle's output line that starts with it
// (tensorboard may log other lines).
json oracle_json(const std::vector<std::string>& args, const std::string& marker) {
  const std::string out = timm::test::run_oracle("tensorboard_oracle.py", args);
  const std::size_t at = out.rfind(marker + " ");
  REQUIRE_MESSAGE(at != std::string::npos, out);
  const std::size_t end = out.find('\n', at);
  return json::parse(out.substr(at + marker.size() + 1, end == std::string::npos ? std::string::npos : end - at));
}

struct Logged {
  std::string tag;
  int64_t step;
  double value;
};

}  // namespace

TEST_CASE("crc32c is CRC-32C (Castagnoli), masked as TFRecord masks it") {
  CHECK(timm::crc32c("123456789") == 0xE3069283U);
  CHECK(timm::crc32c("") == 0U);
  CHECK(timm::masked_crc32c("") == 0xa282ead8U);
  // 32 zero bytes: the iSCSI test vector (RFC 3720, B.4).
  CHECK(timm::crc32c(std::string(32, '\0')) == 0x8A9136AAU);
  CHECK(timm::crc32c(std::string(32, '\xff')) == 0x62A8AB43U);

  const std::vector<std::string> texts{"123456789", "", "brain.Event:2", "a longer text, with punctuation!"};
  const json expected = oracle_json({"crc", texts[0], texts[1], texts[2], texts[3]}, "CRC");
  REQUIRE(expected.size() == texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO(texts[i]);
    CHECK(timm::crc32c(texts[i]) == expected[i][0].get<std::uint32_t>());
    CHECK(timm::masked_crc32c(texts[i]) == expected[i][1].get<std::uint32_t>());
  }
}

TEST_CASE("tfrecord frames data with its length and both masked CRCs") {
  const std::string data = "abc";
  const std::string record = timm::tfrecord(data);
  REQUIRE(record.size() == 8 + 4 + data.size() + 4);
  CHECK(record.substr(0, 8) == std::string("\x03\0\0\0\0\0\0\0", 8));
  auto u32_at = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(record[at + i]);
    return v;
  };
  CHECK(u32_at(8) == timm::masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, 3) == data);
  CHECK(u32_at(15) == timm::masked_crc32c(data));
}

TEST_CASE("event_file_name is TensorBoard's EventFileWriter's") {
  CHECK(timm::event_file_name(1700000000, "host", 42, 0) == "events.out.tfevents.1700000000.host.42.0");
  CHECK(timm::event_file_name(12345, "a.b", 7, 3) == "events.out.tfevents.0000012345.a.b.7.3");
}

TEST_CASE("tensorboard's EventAccumulator reads the written scalars exactly") {
  timm::test::TempDir tmp;
  const fs::path dir = tmp / "run";
  const std::vector<Logged> logged{{"train/loss", 0, 2.302585092994046},
                                   {"train/lr", 0, 0.1},
                                   {"train/loss", 1, 1.25},
                                   {"train/lr", 1, 1e-8},
                                   {"train/loss", 7, -3.5},
                                   {"epoch/eval_top1", 0, 12.3456789},
                                   {"epoch/eval_top1", 1, 99.99},
                                   {"big/step", int64_t{1} << 40, 12345.678}};
  fs::path file;
  {
    timm::TensorBoardWriter writer(dir);  // creates the folder
    file = writer.path();
    for (std::size_t i = 0; i < logged.size();) {
      // Several scalars in one event where they share a step, as the trainer does.
      std::vector<timm::TensorBoardScalar> scalars;
      const int64_t step = logged[i].step;
      for (; i < logged.size() && logged[i].step == step; ++i) scalars.push_back({logged[i].tag, logged[i].value});
      writer.add_scalars(step, scalars);
    }
    writer.flush();
  }
  CHECK(file.parent_path() == dir);
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
  const std::regex name_pattern(R"(events\.out\.tfevents\.[0-9]{10}\.)" +
                                std::regex_replace(host, std::regex(R"([.])"), R"(\.)") + "\\." +
                                std::to_string(getpid()) + R"(\.[0-9]+)");
  CHECK_MESSAGE(std::regex_match(file.filename().string(), name_pattern), file.filename().string());

  const json read = oracle_json({"scalars", dir.string()}, "SCALARS");
  CHECK(read["files"] == json::array({file.filename().string()}));
  CHECK(read["file_version"].get<double>() == 2.0);
  const json& scalars = read["scalars"];
  CHECK(scalars.size() == 4);
  for (const char* tag : {"train/loss", "train/lr", "epoch/eval_top1", "big/step"}) {
    INFO(tag);
    REQUIRE(scalars.contains(tag));
    std::vector<Logged> expected;
    for (const Logged& l : logged) {
      if (l.tag == tag) expected.push_back(l);
    }
    const json& got = scalars[tag];
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(got[i][0].get<int64_t>() == expected[i].step);
      // Exact: the file holds float32, which JSON carries as a double.
      CHECK(static_cast<float>(got[i][1].get<double>()) == static_cast<float>(expected[i].value));
      CHECK(got[i][1].get<double>() == static_cast<double>(static_cast<float>(expected[i].value)));
    }
  }
  // The version event and one event per add_scalars call, all CRCs good.
  CHECK(read["records"].get<int>() == 1 + 6);
}

TEST_CASE("each writer of a process gets its own file; a failure names the file or folder") {
  timm::test::TempDir tmp;
  {
    timm::TensorBoardWriter first(tmp.path());
    timm::TensorBoardWriter second(tmp.path());
    CHECK(first.path() != second.path());
    first.add_scalar("a", 1.0, 0);
    second.add_scalar("a", 2.0, 1);
  }
  const json read = oracle_json({"scalars", tmp.path().string()}, "SCALARS");
  CHECK(read["files"].size() == 2);
  CHECK(read["scalars"]["a"] == json::array({json::array({0, 1.0}), json::array({1, 2.0})}));

  // A file where the folder should be.
  std::ofstream(tmp / "blocker") << "x";
  try {
    timm::TensorBoardWriter writer(tmp / "blocker" / "run");
    FAIL("no error");
  } catch (const timm::Error& e) {
    CHECK(std::string(e.what()).find((tmp / "blocker" / "run").string()) != std::string::npos);
  }
}

TEST_CASE("format_train_status shows epoch, step/total, loss, images/s and the epoch's ETA") {
  timm::TrainStatus s{.epoch = 3,
                      .update_idx = 119,
                      .updates = 468,
                      .loss = 0.43214,
                      .loss_avg = 0.50123,
                      .images_per_second = 1234.54,
                      .epoch_seconds = 24.0};
  // 120 updates in 24 s: 348 left take 69.6 s.
  CHECK(timm::format_train_status(s) == "Train: 3 [119/468  26%]  Loss: 0.432 (0.501)  1234.5 img/s  ETA 1:10");
  s.update_idx = 0;
  s.epoch_seconds = 0.5;
  CHECK(timm::format_train_status(s) == "Train: 3 [  0/468   0%]  Loss: 0.432 (0.501)  1234.5 img/s  ETA 3:54");
  s.update_idx = 467;
  CHECK(timm::format_train_status(s).ends_with("[467/468 100%]  Loss: 0.432 (0.501)  1234.5 img/s  ETA 0:00"));
  CHECK(timm::format_train_status(s).size() < 80);

  CHECK(timm::format_eta(0) == "0:00");
  CHECK(timm::format_eta(59.4) == "0:59");
  CHECK(timm::format_eta(59.6) == "1:00");
  CHECK(timm::format_eta(3599) == "59:59");
  CHECK(timm::format_eta(3600) == "1:00:00");
  CHECK(timm::format_eta(36000 + 61) == "10:01:01");
  CHECK(timm::format_eta(-1) == "?");
  CHECK(timm::format_eta(std::numeric_limits<double>::infinity()) == "?");
}

}  // namespace test_tensorboard
