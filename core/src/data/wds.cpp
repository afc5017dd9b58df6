// timm's ReaderWds (timm/data/readers/reader_wds.py) over webdataset 1.0.2's
// tar streams, as a map-style dataset with a sampler of its own: the shards
// are scanned once into an index of samples (members' byte ranges), and
// WdsSampler replays the order in which timm's DataLoader workers would
// stream them (docs/datasets.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "tar_members.hpp"
#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/base/python_random.hpp"
#include "timm/base/python_repr.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/loader.hpp"
#include "timm/log/log.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace {

constexpr const char* kReader = "wds";
// timm's defaults: the shard shuffle (detshuffle2) and the sample shuffle
// (SAMPLE_SHUFFLE_SIZE, SAMPLE_INITIAL_SIZE; timm's environment variables
// WDS_SHUFFLE_SIZE and WDS_INITIAL_SIZE are not read).
constexpr int64_t kShardShuffleSize = 500;
constexpr int64_t kShardShuffleInitial = 100;
constexpr int64_t kSampleShuffleSize = 8192;
constexpr int64_t kSampleShuffleInitial = 2048;
// A brace pattern expands to at most this many names; an info file and a
// .cls / .json member are read up to these sizes.
constexpr std::size_t kMaxExpandedNames = 1'000'000;
constexpr int64_t kMaxInfoBytes = int64_t{64} << 20;
constexpr int64_t kMaxSidecarBytes = int64_t{1} << 20;

// ---- braceexpand (webdataset's expand_urls) ----------------------------------

// "{a..b}" or "{a..b..step}" with integers: braceexpand's make_int_range
// (zero padding to the longer bound when a bound has a leading zero).
bool parse_int(std::string_view s, int64_t& value) {
  std::size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  if (i >= s.size() || s.size() - i > 18) return false;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  value = negative ? -v : v;
  return true;
}

std::optional<std::vector<std::string>> int_range(std::string_view expr) {
  std::vector<std::string_view> parts;
  std::size_t pos = 0;
  while (true) {
    const std::size_t dots = expr.find("..", pos);
    parts.push_back(expr.substr(pos, dots == std::string_view::npos ? std::string_view::npos : dots - pos));
    if (dots == std::string_view::npos) break;
    pos = dots + 2;
  }
  if (parts.size() != 2 && parts.size() != 3) return std::nullopt;
  int64_t start = 0, end = 0, step = 1;
  if (!parse_int(parts[0], start) || !parse_int(parts[1], end)) return std::nullopt;
  if (parts.size() == 3) {
    std::string_view step_text = parts[2];
    if (step_text.starts_with('-')) step_text.remove_prefix(1);  // braceexpand ignores the sign
    if (step_text.empty() || step_text.starts_with('-') || !parse_int(step_text, step)) return std::nullopt;
    if (step == 0) step = 1;
  }
  std::size_t padding = 0;
  for (const std::string_view bound : {parts[0], parts[1]}) {
    if (bound != "0" && bound != "-0" && (bound.starts_with('0') || bound.starts_with("-0"))) {
      padding = std::max(parts[0].size(), parts[1].size());
    }
  }
  const int64_t count = (start <= end ? end - start : start - end) / step + 1;
  if (count > static_cast<int64_t>(kMaxExpandedNames)) {
    throw UsageError("wds split: the range {" + std::string(expr) + "} expands to " + std::to_string(count) +
                     " names; expected at most " + std::to_string(kMaxExpandedNames));
  }
  std::vector<std::string> out;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t v = start <= end ? start + k * step : start - k * step;
    std::string digits = std::to_string(v < 0 ? -v : v);
    const std::size_t width = padding > 0 ? padding - (v < 0 ? 1 : 0) : 0;  // '%0Nd' counts the sign
    if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
    out.push_back((v < 0 ? "-" : "") + digits);
  }
  return out;
}

std::vector<std::string> expand_pattern(std::string_view pattern, int depth);

void check_count(std::size_t count) {
  if (count > kMaxExpandedNames) {
    throw UsageError("wds split: the brace pattern expands to more than " + std::to_string(kMaxExpandedNames) +
                     " names");
  }
}

// braceexpand's parse_expression: a range, a comma sequence, or (neither) the
// braces kept as text around the expanded inside.
std::vector<std::string> expand_expression(std::string_view expr, int depth) {
  if (auto range = int_range(expr)) return *range;
  std::vector<std::string_view> items;
  std::size_t start = 0;
  int bracket = 0;
  for (std::size_t pos = 0; pos < expr.size(); ++pos) {
    if (expr[pos] == '\\') {
      ++pos;
    } else if (expr[pos] == '{') {
      ++bracket;
    } else if (expr[pos] == '}') {
      --bracket;
    } else if (expr[pos] == ',' && bracket == 0) {
      items.push_back(expr.substr(start, pos - start));
      start = pos + 1;
    }
  }
  std::vector<std::string> out;
  if (bracket != 0 || items.empty()) {
    for (const std::string& inner : expand_pattern(expr, depth + 1)) out.push_back("{" + inner + "}");
    return out;
  }
  items.push_back(expr.substr(start));
  for (const std::string_view item : items) {
    for (std::string& s : expand_pattern(item, depth + 1)) out.push_back(std::move(s));
    check_count(out.size());
  }
  return out;
}

// braceexpand's parse_pattern: the product of the literal parts and the
// top-level brace expressions, escapes still in place.
std::vector<std::string> expand_pattern(std::string_view pattern, int depth) {
  if (depth > 32) throw UsageError("wds split: braces nested more than 32 deep");
  std::vector<std::string> result = {""};
  const auto append = [&](const std::vector<std::string>& options) {
    std::vector<std::string> next;
    for (const std::string& prefix : result) {
      for (const std::string& option : options) next.push_back(prefix + option);
      check_count(next.size());
    }
    result = std::move(next);
  };
  std::size_t start = 0;
  int bracket = 0;
  for (std::size_t pos = 0; pos < pattern.size(); ++pos) {
    if (pattern[pos] == '\\') {
      ++pos;
    } else if (pattern[pos] == '{') {
      if (bracket == 0 && pos > start) {
        append({std::string(pattern.substr(start, pos - start))});
        start = pos;
      }
      ++bracket;
    } else if (pattern[pos] == '}') {
      if (--bracket == 0) {
        append(expand_expression(pattern.substr(start + 1, pos - start - 1), depth));
        start = pos + 1;
      }
    }
  }
  if (bracket != 0) throw UsageError("wds split: unbalanced braces in " + in_quotes(std::string(pattern)));
  if (start < pattern.size()) append({std::string(pattern.substr(start))});
  return result;
}

}  // namespace

std::vector<std::string> wds_expand_urls(const std::string& urls) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t sep = urls.find("::", pos);
    const std::string part = urls.substr(pos, sep == std::string::npos ? std::string::npos : sep - pos);
    for (const std::string& name : expand_pattern(part, 0)) {
      std::string unescaped;  // braceexpand strips the escapes after expanding
      for (std::size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '\\' && i + 1 < name.size()) ++i;
        unescaped += name[i];
      }
      out.push_back(std::move(unescaped));
      check_count(out.size());
    }
    if (sep == std::string::npos) break;
    pos = sep + 2;
  }
  return out;
}

namespace {

// ---- split info ---------------------------------------------------------------

struct SplitInfo {
  int64_t num_samples = 0;
  std::vector<std::string> filenames;
  std::string alt_label;
};

// _load_info: root/_info.json, else root/info.json; {} (with the files
// tried) when neither exists.
nlohmann::json load_info(const fs::path& root, std::vector<std::string>& tried) {
  for (const char* name : {"_info.json", "info.json"}) {
    const fs::path path = root / name;
    tried.push_back(path.string());
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    const tar::File file(path, kReader);
    const int64_t size = file.size();
    if (size > kMaxInfoBytes) {
      throw Error("wds: " + in_quotes(path.string()) + " is " + std::to_string(size) + " bytes; expected at most " +
                  std::to_string(kMaxInfoBytes));
    }
    const std::vector<std::uint8_t> bytes = file.read(0, size);
    nlohmann::json info = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
    if (info.is_discarded() || !info.is_object()) {
      throw Error("wds: " + in_quotes(path.string()) + " is not a JSON object (expected {\"splits\": {...}})");
    }
    return info;
  }
  std::error_code ec;
  if (fs::exists(root / "_info.yaml", ec) || fs::exists(root / "info.yaml", ec)) {
    log_warning("wds: " + in_quotes(root.string()) + " has a YAML info file; only _info.json and info.json are read");
  }
  return nlohmann::json::object();
}

int64_t json_count(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    throw Error("wds: " + where + " is " + value.dump() + "; expected a count (an integer >= 0)");
  }
  return value.get<int64_t>();
}

// _parse_split_info's _info_convert: the split `name` of the info file.
SplitInfo split_from_info(const nlohmann::json& splits, const std::string& name, const std::string& info_name) {
  const nlohmann::json& split = splits.at(name);
  const std::string where = info_name + " split " + in_quotes(name);
  if (!split.is_object() || !split.contains("num_samples") || !split.contains("filenames")) {
    throw Error("wds: " + where + ": expected an object with num_samples and filenames");
  }
  SplitInfo info;
  info.num_samples = json_count(split["num_samples"], where + " num_samples");
  const nlohmann::json& files = split["filenames"];
  if (!files.is_array() || files.empty()) throw Error("wds: " + where + ": filenames is not a list of shard names");
  for (const nlohmann::json& f : files) {
    if (!f.is_string()) throw Error("wds: " + where + ": filenames holds " + f.dump() + "; expected names");
    info.filenames.push_back(f.get<std::string>());
  }
  if (split.contains("alt_label")) {
    if (!split["alt_label"].is_string()) throw Error("wds: " + where + ": alt_label is not a string");
    info.alt_label = split["alt_label"].get<std::string>();
  }
  return info;
}

std::string available_splits(const nlohmann::json& info) {
  std::string names;
  if (info.contains("splits") && info["splits"].is_object()) {
    for (const auto& item : info["splits"].items()) names += (names.empty() ? "" : ", ") + in_quotes(item.key());
  }
  return names.empty() ? "none" : names;
}

// _parse_split_info.
SplitInfo parse_split(const fs::path& root, const std::string& split) {
  std::vector<std::string> tried;
  const nlohmann::json info = load_info(root, tried);
  const bool has_splits = info.contains("splits") && info["splits"].is_object();
  std::string tried_text;
  for (const std::string& t : tried) tried_text += (tried_text.empty() ? "" : ", ") + in_quotes(t);
  const std::string info_name = info.empty() ? "the info file" : "the info file of " + in_quotes(root.string());
  if (split.find("tar") != std::string::npos || split.find("..") != std::string::npos) {
    // A brace pattern of shard names, optionally "|<num_samples>".
    const std::size_t bar = split.find('|');
    const std::string pattern = split.substr(0, bar);
    SplitInfo result;
    if (bar != std::string::npos) {
      const std::string count = split.substr(bar + 1, split.find('|', bar + 1) - bar - 1);
      int64_t n = 0;
      if (!parse_int(count, n) || n < 0) {
        throw UsageError("wds split " + in_quotes(split) + ": " + in_quotes(count) +
                         " after '|' is not a sample count");
      }
      result.num_samples = n;
    }
    result.filenames = wds_expand_urls(pattern);
    // timm: a pattern whose last '-' part names a split of the info file
    // takes that split's alt_label and, without "|N", its shard lengths.
    if (pattern.find("::") == std::string::npos && has_splits) {
      std::vector<std::string> parts;
      std::size_t pos = 0;
      while (parts.size() < 3) {
        const std::size_t dash = pattern.find('-', pos);
        if (dash == std::string::npos) break;
        parts.push_back(pattern.substr(pos, dash - pos));
        pos = dash + 1;
      }
      parts.push_back(pattern.substr(pos));
      const std::string& last = parts.back();
      if (parts.size() > 1 && info["splits"].contains(last)) {
        const nlohmann::json& named = info["splits"][last];
        if (named.is_object() && named.contains("alt_label") && named["alt_label"].is_string()) {
          result.alt_label = named["alt_label"].get<std::string>();
        }
        if (result.num_samples == 0 && named.is_object() && named.contains("filenames") &&
            named.contains("shard_lengths") && named["filenames"].is_array() && named["shard_lengths"].is_array() &&
            named["filenames"].size() == named["shard_lengths"].size()) {
          std::map<std::string, int64_t> lengths;
          for (std::size_t i = 0; i < named["filenames"].size(); ++i) {
            if (!named["filenames"][i].is_string()) continue;
            lengths[named["filenames"][i].get<std::string>()] =
                json_count(named["shard_lengths"][i], info_name + " split " + in_quotes(last) + " shard_lengths");
          }
          int64_t total = 0;
          for (const std::string& f : result.filenames) {
            const auto it = lengths.find(f);
            if (it == lengths.end()) {
              throw Error("wds split " + in_quotes(split) + ": shard " + in_quotes(f) + " is not in " + info_name +
                          " split " + in_quotes(last));
            }
            total += it->second;
          }
          result.num_samples = total;
        }
      }
    }
    return result;
  }
  if (info.empty()) {
    throw UsageError("wds: split " + in_quotes(split) + ": no dataset info file (tried " + tried_text +
                     "); expected one with {\"splits\": {\"" + split +
                     "\": ...}}, or a split of shard names such as 'name-{0000..0009}.tar|<num_samples>'");
  }
  if (!has_splits || !info["splits"].contains(split)) {
    throw UsageError("wds: split " + in_quotes(split) + " not found in " + info_name +
                     "; its splits: " + available_splits(info));
  }
  return split_from_info(info["splits"], split, info_name);
}

// ---- samples --------------------------------------------------------------------

// webdataset's base_plus_ext, the regex ^((?:.*/|)[^.]+)[.]([^/]*)$: the key
// is the path up to the first dot of the name (a name starting with a dot
// belongs to the folder above), the field the rest. False when it does not
// match (no dot, or a slash after it).
bool base_plus_ext(const std::string& path, std::string& key, std::string& field) {
  std::vector<std::size_t> starts;  // where [^.]+ may begin: after a slash, last first, then 0
  for (std::size_t i = path.size(); i-- > 0;) {
    if (path[i] == '/' && path.substr(0, i).find('\n') == std::string::npos) starts.push_back(i + 1);
  }
  starts.push_back(0);
  for (const std::size_t start : starts) {
    const std::size_t dot = path.find('.', start);
    if (dot == std::string::npos || dot == start) continue;
    if (path.find('/', dot) != std::string::npos) continue;
    key = path.substr(0, dot);
    field = path.substr(dot + 1);
    return true;
  }
  return false;
}

// tar_file_iterator's skips: "__*__" at the top level, and skip_meta
// r"__[^/]*__($|/)" (a first path component "__...__").
bool is_meta(const std::string& path) {
  const std::string first = path.substr(0, path.find('/'));
  return first.size() >= 4 && first.starts_with("__") && first.ends_with("__");
}

// Python's int() of a str or bytes: surrounding whitespace, a sign, digits
// with single underscores between them.
std::optional<int64_t> python_int(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  int64_t v = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      if (text[i - 1] == '_') return std::nullopt;
      continue;
    }
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    v = v * 10 + (text[i] - '0');
  }
  return negative ? -v : v;
}

struct Range {
  int64_t offset = -1;
  int64_t size = 0;
  bool present() const { return offset >= 0; }
};

// The fields of one sample as the scan meets them.
struct Group {
  std::string key;
  std::map<std::string, Range> fields;
};

struct Sample {
  std::size_t shard;
  std::string key;
  Range image;
  int64_t target;
};

// The scanned shards: every group (sample) of every shard in stream order,
// and which of them reach the loader.
struct WdsIndex {
  std::vector<std::unique_ptr<tar::File>> shards;
  std::vector<std::vector<int64_t>> shard_groups;  // per shard: its groups' sample index, or -1 when left out
  std::vector<Sample> samples;
  int64_t num_classes = 0;
  int64_t split_num_samples = 0;
  double repeats = 0;
  int64_t channels = 3;
};

class WdsScanner {
 public:
  WdsScanner(const IterableOptions& options, std::string alt_label, const ClassMap* class_map) : options_(options) {
    const std::string input = options.input_key.empty() ? "jpg;png;webp" : options.input_key;
    std::size_t pos = 0;
    while (true) {
      const std::size_t semi = input.find(';', pos);
      image_keys_.push_back(input.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos));
      if (semi == std::string::npos) break;
      pos = semi + 1;
    }
    json_key_ = options.target_key.empty() ? alt_label : options.target_key;
    if (json_key_.find(',') != std::string::npos) {
      throw UsageError("--target-key " + in_quotes(json_key_) +
                       ": multi-field (multi-label) targets are not supported by timm-cpp's wds reader; expected "
                       "one field of the json sidecar holding an integer class");
    }
    if (class_map != nullptr) {
      for (const auto& [name, index] : *class_map) {
        const std::optional<int64_t> source = python_int(name);
        if (!source || *source < 0) {
          throw UsageError("--class-map: " + in_quotes(name) +
                           " is not a class index; a wds dataset's targets are integers, so its class map names "
                           "the source class indices (one per line: the line's number is the new index)");
        }
        class_map_[*source] = index;
      }
      num_classes_ = class_map_num_classes(*class_map);
    }
  }

  void scan(WdsIndex& index, const fs::path& path) {
    index.shards.push_back(std::make_unique<tar::File>(path, kReader));
    const tar::File& file = *index.shards.back();
    const std::size_t shard = index.shards.size() - 1;
    index.shard_groups.emplace_back();
    std::string error;
    const std::vector<tar::Member> members = tar::list_members(file, 0, file.size(), &error);
    if (!error.empty()) {
      log_warning(error + "; the shard's samples before it are kept (webdataset goes on with the next shard)");
    }
    std::optional<Group> group;
    for (const tar::Member& m : members) {
      if (is_meta(m.path)) continue;
      std::string key, field;
      if (!base_plus_ext(m.path, key, field)) continue;
      field = ascii_lower(field);  // group_by_keys' lcase (ASCII here; Python lowers Unicode too)
      if (!group || group->key != key) {
        if (group) finish(index, shard, *group);
        group = Group{key, {}};
      }
      if (!group->fields.emplace(field, Range{m.offset, m.size}).second) {
        log_warning("wds: " + in_quotes(file.path()) + ": duplicate member " + in_quotes(m.path) + " in sample " +
                    in_quotes(key) + " is ignored (as webdataset's handler)");
      }
    }
    if (group) finish(index, shard, *group);
  }

  void report() const {
    for (const auto& [reason, count] : skipped_) {
      log_warning("wds: left out " + std::to_string(count) + " sample(s) " + reason + ", e.g. " +
                  in_quotes(skipped_example_.at(reason)) + " (webdataset's handler skips them)");
    }
  }

  int64_t num_classes(const WdsIndex& index) const {
    if (!class_map_.empty()) return num_classes_;
    int64_t max_target = -1;
    for (const Sample& s : index.samples) max_target = std::max(max_target, s.target);
    return max_target + 1;
  }

 private:
  void skip(const std::string& reason, const std::string& where) {
    ++skipped_[reason];
    skipped_example_.emplace(reason, where);
  }

  std::string read_member(const tar::File& file, const Range& range, const std::string& where) {
    if (range.size > kMaxSidecarBytes) {
      throw Error("wds: " + where + " is " + std::to_string(range.size) + " bytes; expected at most " +
                  std::to_string(kMaxSidecarBytes));
    }
    const std::vector<std::uint8_t> bytes = file.read(range.offset, range.size);
    return std::string(bytes.begin(), bytes.end());
  }

  // _decode's target: std::nullopt leaves the sample out.
  std::optional<int64_t> target_of(const tar::File& file, const Group& group, const std::string& where) {
    if (json_key_.empty()) {
      const auto cls = group.fields.find("cls");
      if (cls == group.fields.end()) {
        skip("without a .cls member", where);
        return std::nullopt;
      }
      const std::optional<int64_t> target = python_int(read_member(file, cls->second, where + ".cls"));
      if (!target) {
        skip("whose .cls is not an integer", where);
        return std::nullopt;
      }
      if (*target < 0) {
        skip("with a negative .cls class", where);  // timm would pass it to the loss, which fails
        return std::nullopt;
      }
      return *target;
    }
    const auto json = group.fields.find("json");
    if (json == group.fields.end()) {
      throw Error("wds: target key " + in_quotes(json_key_) + " requires a json sidecar; sample " + in_quotes(where) +
                  " has none (its fields: " + field_names(group) + ")");
    }
    const std::string text = read_member(file, json->second, where + ".json");
    const nlohmann::json meta = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (meta.is_discarded()) {
      skip("whose .json does not parse", where);
      return std::nullopt;
    }
    const nlohmann::json* value = field_of(meta, json_key_);
    if (value == nullptr) {
      std::string keys;
      if (meta.is_object()) {
        for (const auto& item : meta.items()) keys += (keys.empty() ? "" : ", ") + in_quotes(item.key());
      }
      throw Error("wds: target key " + in_quotes(json_key_) + " not found in the json sidecar of sample " +
                  in_quotes(where) + "; available keys: " + (keys.empty() ? "none" : keys));
    }
    if (value->is_array()) {
      throw UsageError("wds: target key " + in_quotes(json_key_) + " of sample " + in_quotes(where) +
                       " holds a list; multi-label targets are not supported by timm-cpp's wds reader");
    }
    std::optional<int64_t> target;
    if (value->is_number_integer()) {
      target = value->get<int64_t>();
    } else if (value->is_number_float() && std::isfinite(value->get<double>()) &&
               std::abs(value->get<double>()) < 9.0e18) {
      target = static_cast<int64_t>(std::trunc(value->get<double>()));  // Python's int(float)
    } else if (value->is_boolean()) {
      target = value->get<bool>() ? 1 : 0;
    } else if (value->is_string()) {
      target = python_int(value->get<std::string>());
      if (!target) {
        skip("whose target is a string that is not an integer", where);
        return std::nullopt;
      }
    } else {
      // int(None) or int(dict): a TypeError, which timm's handler re-raises.
      throw Error("wds: target key " + in_quotes(json_key_) + " of sample " + in_quotes(where) + " holds " +
                  value->dump() + "; expected an integer class");
    }
    if (*target < 0) return std::nullopt;  // timm: negative labels mark skipped samples
    return target;
  }

  // timm's get_field: the key itself, else a '/' path through objects.
  static const nlohmann::json* field_of(const nlohmann::json& meta, const std::string& key) {
    if (!meta.is_object()) return nullptr;
    if (meta.contains(key)) return &meta[key];
    const nlohmann::json* value = &meta;
    std::size_t pos = 0;
    while (true) {
      const std::size_t slash = key.find('/', pos);
      const std::string part = key.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
      if (value->is_array()) {
        throw UsageError("wds: target key " + in_quotes(key) +
                         " reaches into a list; multi-label targets are not supported by timm-cpp's wds reader");
      }
      if (!value->is_object() || !value->contains(part)) return nullptr;
      value = &(*value)[part];
      if (slash == std::string::npos) return value;
      pos = slash + 1;
    }
  }

  static std::string field_names(const Group& group) {
    std::string names;
    for (const auto& item : group.fields) names += (names.empty() ? "" : ", ") + in_quotes(item.first);
    return names.empty() ? "none" : names;
  }

  void finish(WdsIndex& index, std::size_t shard, const Group& group) {
    const tar::File& file = *index.shards[shard];
    const std::string where = file.path() + ":" + group.key;
    std::optional<int64_t> target = target_of(file, group, where);  // _decode: the target first
    Range image;
    if (target) {
      for (const std::string& key : image_keys_) {
        const auto it = group.fields.find(key);
        if (it != group.fields.end()) {
          image = it->second;
          break;
        }
      }
      if (!image.present()) {
        skip("without an image (--input-key fields " + field_list() + ")", where);
        target.reset();
      }
    }
    if (target && !class_map_.empty()) {
      const auto it = class_map_.find(*target);
      if (it == class_map_.end()) {
        throw Error("wds: sample " + in_quotes(where) + " has class " + std::to_string(*target) +
                    ", which the class map does not name");
      }
      target = it->second;
    }
    if (!target) {
      index.shard_groups[shard].push_back(-1);
      return;
    }
    index.shard_groups[shard].push_back(static_cast<int64_t>(index.samples.size()));
    index.samples.push_back({shard, group.key, image, *target});
  }

  std::string field_list() const {
    std::string s;
    for (const std::string& k : image_keys_) s += (s.empty() ? "" : ";") + k;
    return in_quotes(s);
  }

  IterableOptions options_;
  std::vector<std::string> image_keys_;
  std::string json_key_;
  std::map<int64_t, int64_t> class_map_;
  int64_t num_classes_ = 0;
  std::map<std::string, int64_t> skipped_;
  std::map<std::string, std::string> skipped_example_;
};

// ---- the order --------------------------------------------------------------------

// webdataset's _shuffle as a pull stream: fills a buffer from `source`
// (taking up to two items per step while it is below `bufsize`) and, once
// it holds `initial`, yields a random one (pick: swap with the last, pop).
class ShuffleStream {
 public:
  ShuffleStream(const std::vector<int64_t>& source, int64_t bufsize, int64_t initial, PyRandom& rng)
      : source_(source), bufsize_(bufsize), initial_(std::min(initial, bufsize)), rng_(rng) {}

  bool next(int64_t& out) {
    while (pos_ < source_.size()) {
      buf_.push_back(source_[pos_++]);
      if (static_cast<int64_t>(buf_.size()) < bufsize_ && pos_ < source_.size()) buf_.push_back(source_[pos_++]);
      if (static_cast<int64_t>(buf_.size()) >= initial_) {
        out = pick();
        return true;
      }
    }
    if (buf_.empty()) return false;
    out = pick();
    return true;
  }

 private:
  int64_t pick() {
    const auto k = static_cast<std::size_t>(rng_.randint(0, static_cast<int64_t>(buf_.size()) - 1));
    const int64_t item = buf_[k];
    buf_[k] = buf_.back();
    buf_.pop_back();
    return item;
  }

  const std::vector<int64_t>& source_;
  std::size_t pos_ = 0;
  int64_t bufsize_, initial_;
  PyRandom& rng_;
  std::vector<int64_t> buf_;
};

PyRandom python_random(int64_t seed) {
  // random.Random(n) seeds with abs(n).
  const uint64_t magnitude = seed < 0 ? uint64_t{0} - static_cast<uint64_t>(seed) : static_cast<uint64_t>(seed);
  return PyRandom(magnitude);
}

class WdsSampler final : public Sampler {
 public:
  WdsSampler(std::shared_ptr<const WdsIndex> index, int64_t num_samples, const StreamConfig& config)
      : index_(std::move(index)), num_samples_(num_samples), config_(config) {
    if (config_.world_size < 1 || config_.rank < 0 || config_.rank >= config_.world_size) {
      throw UsageError("wds: rank " + std::to_string(config_.rank) + " of a world of " +
                       std::to_string(config_.world_size));
    }
    if (config_.batch_size < 1) throw UsageError("wds: batch size must be positive");
    if (config_.num_workers < 0) throw UsageError("wds: workers (-j) must be >= 0");
    workers_ = std::max<int64_t>(1, config_.num_workers);
    global_workers_ = config_.world_size * workers_;
    if (config_.is_training && num_samples_ <= 0) {
      throw UsageError(
          "wds: invalid split definition: num_samples is not specified for training (set it in the info file, as "
          "'|N' after the shard pattern, or with --train-num-samples)");
    }
    const auto shards = static_cast<int64_t>(index_->shards.size());
    if (config_.is_training && config_.world_size > 1 && shards < global_workers_) {
      throw UsageError("wds: " + std::to_string(shards) + " shards for " + std::to_string(config_.world_size) +
                       " processes x " + std::to_string(workers_) +
                       " workers: every loader worker needs a shard, or the processes would train different numbers "
                       "of batches; expected at least " +
                       std::to_string(global_workers_) + " shards (or fewer workers, -j)");
    }
    // _num_samples_per_worker, with max(1, repeats) as timm's tfds and hfids readers.
    const double per_worker = std::max(1.0, index_->repeats) * static_cast<double>(num_samples_) /
                              static_cast<double>(std::max(global_workers_, config_.world_size));
    limited_ = config_.is_training || config_.world_size > 1;
    double n = limited_ ? std::ceil(per_worker) : per_worker;
    if (config_.is_training) {
      n = std::ceil(n / static_cast<double>(config_.batch_size)) * static_cast<double>(config_.batch_size);
    }
    // A split's num_samples comes from a file: no epoch beyond what an index
    // vector can sensibly hold.
    const double epoch_samples = n * static_cast<double>(workers_);
    if (epoch_samples > static_cast<double>(kMaxRepeatedSamples)) {
      throw UsageError("wds: an epoch of " + python_float_repr(epoch_samples) + " samples per process (num_samples " +
                       std::to_string(num_samples_) + ", --epoch-repeats " + python_float_repr(index_->repeats) +
                       "); expected at most " + std::to_string(kMaxRepeatedSamples));
    }
    worker_samples_ = static_cast<int64_t>(n);
  }

  std::vector<int64_t> indices(int64_t epoch) const override { return plan(epoch).indices; }

 private:
  // detshuffle2: the shard list shuffled by random.Random(seed + epoch), the
  // same on every rank and worker.
  std::vector<int64_t> shard_order(int64_t epoch) const {
    std::vector<int64_t> listing(index_->shards.size());
    for (std::size_t i = 0; i < listing.size(); ++i) listing[i] = static_cast<int64_t>(i);
    if (!config_.is_training) return listing;
    PyRandom rng = python_random(config_.seed + epoch);
    ShuffleStream shuffle(listing, kShardShuffleSize, kShardShuffleInitial, rng);
    std::vector<int64_t> out;
    int64_t shard = 0;
    while (shuffle.next(shard)) out.push_back(shard);
    return out;
  }

  // One worker's stream: its shards' samples (sample-shuffled in training),
  // repeated until worker_samples_ when limited (with_epoch), a pass that
  // yields nothing ending it.
  std::vector<int64_t> worker_stream(const std::vector<int64_t>& shards, int64_t global_worker, int64_t epoch) const {
    std::vector<int64_t> groups;  // sample index or -1, in stream order
    for (std::size_t k = static_cast<std::size_t>(global_worker); k < shards.size();
         k += static_cast<std::size_t>(global_workers_)) {
      const auto& g = index_->shard_groups[static_cast<std::size_t>(shards[k])];
      groups.insert(groups.end(), g.begin(), g.end());
    }
    std::vector<int64_t> out;
    // timm: random.Random(<torch's worker seed>), which C++ cannot know; a
    // documented seed per (seed, epoch, global worker) instead.
    PyRandom rng = python_random(config_.seed + 65536 * epoch + global_worker + 1);
    while (true) {
      int64_t yielded = 0;
      const auto take = [&](int64_t item) {
        if (item < 0) return false;  // left out by _decode, after the shuffle
        out.push_back(item);
        ++yielded;
        return limited_ && static_cast<int64_t>(out.size()) >= worker_samples_;
      };
      if (config_.is_training) {
        ShuffleStream shuffle(groups, kSampleShuffleSize, kSampleShuffleInitial, rng);
        for (int64_t item = 0; shuffle.next(item);) {
          if (take(item)) return out;
        }
      } else {
        for (const int64_t item : groups) {
          if (take(item)) return out;
        }
      }
      if (!limited_ || yielded == 0) return out;
    }
  }

 public:
  // The epoch's order and batch sizes as timm's loader yields them.
  EpochPlan plan(int64_t epoch) const override {
    const std::vector<int64_t> shards = shard_order(epoch);
    std::vector<std::vector<int64_t>> streams;
    for (int64_t w = 0; w < workers_; ++w) {
      streams.push_back(worker_stream(shards, config_.rank * workers_ + w, epoch));
    }
    // torch's DataLoader: each worker batches its own stream (the last batch
    // partial), and the loader takes the workers' batches in turn, passing
    // over a worker whose stream has ended.
    EpochPlan order;
    const auto bs = static_cast<std::size_t>(config_.batch_size);
    std::vector<std::size_t> pos(streams.size(), 0);
    for (bool any = true; any;) {
      any = false;
      for (std::size_t w = 0; w < streams.size(); ++w) {
        const std::size_t begin = pos[w], end = std::min(streams[w].size(), begin + bs);
        if (begin >= end) continue;
        order.indices.insert(order.indices.end(), streams[w].begin() + static_cast<std::ptrdiff_t>(begin),
                             streams[w].begin() + static_cast<std::ptrdiff_t>(end));
        order.batch_sizes.push_back(static_cast<int64_t>(end - begin));
        pos[w] = end;
        any = true;
      }
    }
    return order;
  }

 private:
  std::shared_ptr<const WdsIndex> index_;
  int64_t num_samples_;
  StreamConfig config_;
  int64_t workers_ = 1, global_workers_ = 1, worker_samples_ = 0;
  bool limited_ = false;
};

class WdsDataset final : public IterableDataset {
 public:
  WdsDataset(std::shared_ptr<const WdsIndex> index, int64_t num_samples)
      : index_(std::move(index)), num_samples_(num_samples) {}

  std::size_t size() const override { return index_->samples.size(); }
  Image image(std::size_t i) const override {
    const Sample& s = index_->samples.at(i);
    const std::vector<std::uint8_t> bytes = index_->shards[s.shard]->read(s.image.offset, s.image.size);
    return decode_image(bytes, describe(i), index_->channels);
  }
  int64_t target(std::size_t i) const override { return index_->samples.at(i).target; }
  int64_t num_classes() const override { return index_->num_classes; }
  std::string describe(std::size_t i) const override {
    const Sample& s = index_->samples.at(i);
    return index_->shards[s.shard]->path() + ":" + s.key;
  }
  std::optional<EncodedImage> encoded(std::size_t i) const override {
    const Sample& s = index_->samples.at(i);
    return EncodedImage{index_->shards[s.shard]->read(s.image.offset, s.image.size), index_->channels};
  }
  std::shared_ptr<Sampler> make_sampler(const StreamConfig& config) const override {
    return std::make_shared<WdsSampler>(index_, num_samples_, config);
  }
  std::shared_ptr<const IterableDataset> with_num_samples(int64_t num_samples) const override {
    return std::make_shared<WdsDataset>(index_, num_samples);
  }

 private:
  std::shared_ptr<const WdsIndex> index_;
  int64_t num_samples_;
};

}  // namespace

std::unique_ptr<IterableDataset> make_wds(const fs::path& root, const std::string& split, int64_t channels,
                                          const IterableOptions& options, const ClassMap* class_map) {
  if (root.empty()) throw UsageError("wds: --data-dir is required (the folder of the shards and _info.json)");
  if (!(options.repeats >= 0) || !std::isfinite(options.repeats)) {
    throw UsageError("--epoch-repeats " + python_float_repr(options.repeats) + ": expected a number >= 0");
  }
  const SplitInfo info = parse_split(root, split);
  auto index = std::make_shared<WdsIndex>();
  index->channels = channels;
  index->repeats = options.repeats;
  index->split_num_samples = info.num_samples;
  WdsScanner scanner(options, info.alt_label, class_map);
  for (const std::string& name : info.filenames) {
    if (name.find("://") != std::string::npos || name.starts_with("pipe:")) {
      throw UsageError("wds: shard " + in_quotes(name) + " is a URL; timm-cpp reads local shards only");
    }
    const fs::path path = root / name;  // os.path.join: an absolute name stands alone
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw Error("wds: shard " + in_quotes(path.string()) + " of split " + in_quotes(split) +
                  " is missing (timm would skip it with a warning)");
    }
    scanner.scan(*index, path);
  }
  scanner.report();
  if (index->samples.empty()) {
    throw Error("wds: split " + in_quotes(split) + " of " + in_quotes(root.string()) + " has no usable sample");
  }
  index->num_classes = scanner.num_classes(*index);
  return std::make_unique<WdsDataset>(std::move(index), info.num_samples);
}

}  // namespace timm
