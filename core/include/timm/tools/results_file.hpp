// The --results-file of timm's scripts: rows of named values written as CSV
// (csv.DictWriter: header from the first row's keys) or JSON (a list of
// objects, or one object when `single` is set), chosen by the file's
// extension (.json, else CSV) unless `format` is given ("csv" | "json").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace timm {

// A cell: text, a number (written with Python's float repr), an integer, or a
// list (a JSON array; in CSV Python's list repr "[1, 2]").
using ResultValue =
    std::variant<std::string, double, int64_t, std::vector<double>, std::vector<int64_t>, std::vector<std::string>>;
using ResultRow = std::vector<std::pair<std::string, ResultValue>>;

// "csv" or "json" from `format` when not empty, else from the extension.
std::string results_format(const std::filesystem::path& file, const std::string& format = "");

// The text of the rows in `format`.
std::string format_results(const std::vector<ResultRow>& rows, const std::string& format, bool single = false);

// Writes the rows atomically; throws Error naming the file on failure.
void write_results_file(const std::filesystem::path& file, const std::vector<ResultRow>& rows,
                        const std::string& format = "", bool single = false);

}  // namespace timm
