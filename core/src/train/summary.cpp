#include "timm/train/summary.hpp"

#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"

namespace timm {
namespace fs = std::filesystem;

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
                    const std::vector<std::pair<std::string, double>>& eval_metrics, double lr, bool write_header) {
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
  std::ofstream out(csv_path, write_header ? std::ios::trunc : std::ios::app);
  if (!out) throw Error("cannot write '" + csv_path.string() + "'");
  // csv.DictWriter ends rows with "\r\n".
  if (write_header) out << header << "\r\n";
  out << row << "\r\n";
}

}  // namespace timm
