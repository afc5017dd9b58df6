#include "timm/train/summary.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/io/atomic_file.hpp"

namespace timm {
namespace fs = std::filesystem;
namespace {

// The rows of `csv_path` (with their "\r\n") for epochs before `epoch`,
// when its first line is `header`; nothing otherwise.
std::string earlier_rows(const fs::path& csv_path, const std::string& header, int64_t epoch) {
  std::ifstream in(csv_path, std::ios::binary);
  std::string line;
  if (!in || !std::getline(in, line) || line != header + "\r") return "";
  std::string rows;
  while (std::getline(in, line)) {
    const std::size_t comma = line.find(',');
    int64_t row_epoch = 0;
    const char* end = line.data() + (comma == std::string::npos ? line.size() : comma);
    if (std::from_chars(line.data(), end, row_epoch).ptr != end || row_epoch >= epoch) break;
    rows += line + "\n";
  }
  return rows;
}

}  // namespace

std::string safe_model_name(const std::string& model_name) {
  std::string name = model_name;
  for (const char* prefix : {"hf-hub:", "local-dir:"}) {
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
  }
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

fs::path make_output_dir(const std::string& output, const std::string& experiment, const std::string& model_name,
                         int64_t img_size) {
  std::string name = experiment;
  if (name.empty()) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
    name = std::string(stamp) + "-" + safe_model_name(model_name) + "-" + std::to_string(img_size);
  }
  const fs::path dir = fs::path(output.empty() ? "./output/train" : output) / name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create output folder '" + dir.string() + "': " + ec.message());
  return dir;
}

void update_summary(const fs::path& csv_path, int64_t epoch,
                    const std::vector<std::pair<std::string, double>>& train_metrics,
                    const std::vector<std::pair<std::string, double>>& eval_metrics, double lr) {
  std::string header = "epoch";
  std::string row = std::to_string(epoch);
  auto add = [&](const std::string& key, double value) {
    header += ',';
    header += key;
    row += ',';
    row += python_float_repr(value);
  };
  for (const auto& [key, value] : train_metrics) add("train_" + key, value);
  for (const auto& [key, value] : eval_metrics) add("eval_" + key, value);
  add("lr", lr);
  // csv.DictWriter ends rows with "\r\n".
  std::string text = header + "\r\n";
  text += earlier_rows(csv_path, header, epoch);
  text += row + "\r\n";
  write_file_atomically(csv_path, text);
}

}  // namespace timm
