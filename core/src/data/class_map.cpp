#include "timm/data/class_map.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"
#include "timm/io/pickle.hpp"

namespace fs = std::filesystem;

namespace timm {
namespace {

// Python's str.isspace() for the ASCII range.
bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

std::string py_strip(std::string_view s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && is_py_space(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && is_py_space(static_cast<unsigned char>(s[end - 1]))) --end;
  return std::string(s.substr(begin, end - begin));
}

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF), as Python's utf-8 codec accepts.
bool is_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("class map " + in_quotes(path.string()) + ": cannot open the file");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ClassMap read_txt(const fs::path& path) {
  const std::string text = read_all(path);
  const std::string where = "class map " + in_quotes(path.string());
  ClassMap map;
  std::map<std::string, int64_t> line_of;  // 1-based, for messages
  int64_t index = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find_first_of("\r\n", pos);
    const std::string_view raw = std::string_view(text).substr(pos, end == std::string::npos ? end : end - pos);
    if (end == std::string::npos) {
      pos = text.size();
    } else {
      pos = end + ((text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') ? 2 : 1);
    }
    const int64_t line = index + 1;
    if (!is_utf8(raw)) throw Error(where + ", line " + std::to_string(line) + ": not UTF-8 text");
    const std::string name = py_strip(raw);
    if (name.empty()) {
      throw Error(where + ", line " + std::to_string(line) + ": empty class name; expected one class name per line");
    }
    if (auto [it, added] = line_of.emplace(name, line); !added) {
      throw Error(where + ", line " + std::to_string(line) + ": class name " + in_quotes(name) + " repeats line " +
                  std::to_string(it->second) + "; expected each class once");
    }
    map[name] = index++;
  }
  if (map.empty()) throw Error(where + ": no class names; expected one class name per line");
  return map;
}

// timm's _ClassMapUnpickler: no global at all.
class NoGlobals final : public pickle::Hooks {
 public:
  pickle::Ref find_class(pickle::Unpickler& u, const std::string& module, const std::string& name) override {
    u.fail("global " + module + "." + name + " is not permitted in a class map file");
  }
};

ClassMap read_pkl(const fs::path& path) {
  const std::string bytes = read_all(path);
  const std::string where = "class map " + in_quotes(path.string());
  NoGlobals hooks;
  pickle::UnpickleOptions options;
  options.context = where;
  options.name = "the class map";
  options.expected = "a pickled dict {class name: index}";
  const pickle::Ref root = pickle::Unpickler(bytes, hooks, options).run();
  if (root->kind != pickle::Value::Kind::kDict) throw Error(where + ": expected a pickled dict {class name: index}");
  ClassMap map;
  for (const auto& [key, value] : root->entries) {
    const bool ascii = !key->py2_str || std::all_of(key->s.begin(), key->s.end(),
                                                    [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    if (key->kind != pickle::Value::Kind::kStr || !ascii) {
      throw Error(where +
                  ": a key is not a class name (str); expected a dict {class name: index} (keys that are "
                  "source class indices apply to datasets that store indices, not to image folders or tars)");
    }
    if (value->kind != pickle::Value::Kind::kInt) {
      throw Error(where + ": the index of class " + in_quotes(key->s) + " is not an int");
    }
    map[key->s] = value->i;  // a repeated key: the last, as Python's dict
  }
  if (map.empty()) throw Error(where + ": an empty dict; expected {class name: index}");
  return map;
}

}  // namespace

ClassMap load_class_map(const fs::path& file, const fs::path& root) {
  std::error_code ec;
  fs::path path = file;
  if (!fs::exists(path, ec)) {
    path = root / file;
    if (root.empty() || !fs::exists(path, ec)) {
      throw UsageError("--class-map " + in_quotes(file.string()) + ": no such file" +
                       (root.empty() ? "" : " (nor in " + in_quotes(root.string()) + ")"));
    }
  }
  const std::string ext = ascii_lower(file.extension().string());
  ClassMap map;
  if (ext == ".txt") {
    map = read_txt(path);
  } else if (ext == ".pkl") {
    map = read_pkl(path);
  } else {
    throw UsageError("--class-map " + in_quotes(file.string()) +
                     ": unsupported class map file extension; expected .txt (one class name per line) or .pkl");
  }
  for (const auto& [name, index] : map) {
    if (index < 0) {
      throw Error("class map " + in_quotes(path.string()) + ": class " + in_quotes(name) + " has index " +
                  std::to_string(index) + "; expected 0 or more");
    }
  }
  return map;
}

int64_t class_map_num_classes(const ClassMap& class_map) {
  int64_t most = -1;
  for (const auto& [name, index] : class_map) most = std::max(most, index);
  return most + 1;
}

}  // namespace timm
