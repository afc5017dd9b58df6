// Name utilities shared by the registry and the CLI: timm's wildcard matching
// for --list-models, timm's natural sort order, "did you mean" suggestions,
// ASCII lowercasing, and the integer lists of model descriptions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace timm {

// `s` with 'A'-'Z' turned into 'a'-'z' and every other byte (digits,
// punctuation, UTF-8 and other non-ASCII bytes) unchanged, independent of the
// C locale: Python's str.lower() for ASCII names, extensions and flag values.
std::string ascii_lower(std::string_view s);

// fnmatch-style match as Python's fnmatch.fnmatchcase: '*', '?', '[seq]',
// '[!seq]'. Case-sensitive, as timm's list_models on POSIX.
bool wildcard_match(std::string_view pattern, std::string_view name);

// Whether `name` matches any of `patterns` (wildcard_match): timm's
// _matches_pattern for no_weight_decay and fallback lists.
bool wildcard_match_any(const std::vector<std::string>& patterns, std::string_view name);

// timm's natural_key order: case-insensitive, digit runs compared as numbers
// ("resnet18" < "resnet101"; "b2" < "B10").
bool natural_less(std::string_view a, std::string_view b);

// Up to max_count known names closest to `name` (edit distance, then prefix
// and substring matches), closest first. Empty when nothing is plausibly close.
std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t max_count = 3);

// `names` joined by ", ", each in single quotes when `quoted`: the list of
// an "expected one of ..." message ("avg, max" or "'avg', 'max'").
template <class Names>
std::string joined_names(const Names& names, bool quoted = false) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) text += ", ";
    if (quoted) text += '\'';
    text += name;
    if (quoted) text += '\'';
  }
  return text;
}

// Integers joined by `sep`, "6-12-24-16": the depths and widths a model's
// description lists in --list-models. Appended piecewise (g++ 12 warns
// falsely on `"-" + std::to_string(v)` at -O2, -Wstringop-overflow).
template <class Ints>
std::string joined_ints(const Ints& values, char sep = '-') {
  std::string text;
  for (const auto& value : values) {
    if (!text.empty()) text += sep;
    text += std::to_string(value);
  }
  return text;
}

}  // namespace timm
