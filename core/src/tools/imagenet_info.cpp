#include "timm/tools/imagenet_info.hpp"

#include <sstream>
#include <string_view>

#include "timm/base/error.hpp"

namespace timm {
namespace {

constexpr std::string_view kLabelsTsv =
#include "timm/tools/imagenet1k_labels.inc"
    ;

std::vector<ClassLabel> parse_labels() {
  std::vector<ClassLabel> labels;
  std::istringstream lines{std::string(kLabelsTsv)};
  for (std::string line; std::getline(lines, line);) {
    const auto tab1 = line.find('\t');
    const auto tab2 = tab1 == std::string::npos ? std::string::npos : line.find('\t', tab1 + 1);
    if (tab2 == std::string::npos)
      throw Error("imagenet1k_labels.tsv line " + std::to_string(labels.size() + 1) +
                  ": expected three tab-separated fields");
    labels.push_back({line.substr(0, tab1), line.substr(tab1 + 1, tab2 - tab1 - 1), line.substr(tab2 + 1)});
  }
  if (labels.size() != 1000)
    throw Error("imagenet1k_labels.tsv: " + std::to_string(labels.size()) + " classes, expected 1000");
  return labels;
}

}  // namespace

const std::vector<ClassLabel>& imagenet1k_labels() {
  static const std::vector<ClassLabel> labels = parse_labels();
  return labels;
}

}  // namespace timm
