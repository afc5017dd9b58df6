#include "timm/tools/results_file.hpp"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "timm/base/error.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/io/atomic_file.hpp"

namespace timm {
namespace {

nlohmann::ordered_json to_json(const ResultValue& value) {
  return std::visit([](const auto& v) { return nlohmann::ordered_json(v); }, value);
}

nlohmann::ordered_json to_json(const ResultRow& row) {
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const auto& [key, value] : row) object[key] = to_json(value);
  return object;
}

template <class T, class F>
std::string list_repr(const std::vector<T>& values, F item) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + item(values[i]);
  return out + "]";
}

std::string cell_text(const ResultValue& value) {
  struct Visitor {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(double d) const { return python_float_repr(d); }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(const std::vector<double>& v) const { return list_repr(v, python_float_repr); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return list_repr(v, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return list_repr(v, [](const std::string& s) { return "'" + s + "'"; });
    }
  };
  return std::visit(Visitor{}, value);
}

// csv.writer's QUOTE_MINIMAL.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string format_csv(const std::vector<ResultRow>& rows) {
  if (rows.empty()) return "";
  std::ostringstream out;
  const ResultRow& header = rows.front();
  for (std::size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(header[i].first);
  out << "\r\n";
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < header.size(); ++i) {
      const auto it = std::find_if(row.begin(), row.end(), [&](const auto& kv) { return kv.first == header[i].first; });
      out << (i ? "," : "") << (it == row.end() ? "" : csv_field(cell_text(it->second)));
    }
    out << "\r\n";
  }
  return out.str();
}

}  // namespace

std::string results_format(const std::filesystem::path& file, const std::string& format) {
  std::string chosen = format;
  if (chosen.empty()) chosen = file.extension() == ".json" ? "json" : "csv";
  if (chosen != "csv" && chosen != "json") {
    throw UsageError("--results-format '" + format + "': expected csv or json");
  }
  return chosen;
}

std::string format_results(const std::vector<ResultRow>& rows, const std::string& format, bool single) {
  if (format == "csv") return format_csv(rows);
  if (single && rows.size() == 1) return to_json(rows.front()).dump(4) + "\n";
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& row : rows) list.push_back(to_json(row));
  return list.dump(4) + "\n";
}

void write_results_file(const std::filesystem::path& file, const std::vector<ResultRow>& rows,
                        const std::string& format, bool single) {
  write_file_atomically(file, format_results(rows, results_format(file, format), single));
}

}  // namespace timm
