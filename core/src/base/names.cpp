#include "timm/base/names.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace timm {
namespace {

// Only 'A'-'Z' change: std::tolower depends on the locale and is undefined for
// a negative char (a non-ASCII byte where char is signed).
char lower_byte(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Matches a '[...]' class at pattern[i] against c; sets `end` past the ']'.
// Returns false with end = npos when the bracket is unterminated (then '['
// is literal, as in Python's fnmatch).
bool match_class(std::string_view pattern, std::size_t i, char c, std::size_t& end, bool& matched) {
  std::size_t j = i + 1;
  bool negate = false;
  if (j < pattern.size() && pattern[j] == '!') {
    negate = true;
    ++j;
  }
  if (j < pattern.size() && pattern[j] == ']') ++j;  // a leading ']' is literal
  while (j < pattern.size() && pattern[j] != ']') ++j;
  if (j >= pattern.size()) {
    end = std::string_view::npos;
    return false;
  }
  end = j + 1;
  bool in = false;
  std::size_t k = i + 1 + (negate ? 1 : 0);
  while (k < j) {
    if (k + 2 < j && pattern[k + 1] == '-') {
      if (pattern[k] <= c && c <= pattern[k + 2]) in = true;
      k += 3;
    } else {
      if (pattern[k] == c) in = true;
      ++k;
    }
  }
  matched = in != negate;
  return true;
}

bool match_from(std::string_view p, std::size_t pi, std::string_view s, std::size_t si) {
  while (pi < p.size()) {
    const char pc = p[pi];
    if (pc == '*') {
      while (pi < p.size() && p[pi] == '*') ++pi;
      if (pi == p.size()) return true;
      for (std::size_t k = si; k <= s.size(); ++k) {
        if (match_from(p, pi, s, k)) return true;
      }
      return false;
    }
    if (si == s.size()) return false;
    if (pc == '?') {
      ++pi;
      ++si;
      continue;
    }
    if (pc == '[') {
      std::size_t end = 0;
      bool matched = false;
      if (match_class(p, pi, s[si], end, matched)) {
        if (!matched) return false;
        pi = end;
        ++si;
        continue;
      }
    }
    if (pc != s[si]) return false;
    ++pi;
    ++si;
  }
  return si == s.size();
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t cost = lower_byte(a[i - 1]) == lower_byte(b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower_byte(c);
  return out;
}

bool wildcard_match(std::string_view pattern, std::string_view name) { return match_from(pattern, 0, name, 0); }

bool wildcard_match_any(const std::vector<std::string>& patterns, std::string_view name) {
  for (const std::string& pattern : patterns) {
    if (wildcard_match(pattern, name)) return true;
  }
  return false;
}

bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i]));
    const bool db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      // Compare as numbers: strip leading zeros, then length, then digits.
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
      continue;
    }
    // Python compares int and str tokens only by position; a digit run sorts
    // before text here, which is what the natural order means in practice.
    if (da != db) return da;
    const char ca = lower_byte(a[i]);
    const char cb = lower_byte(b[j]);
    if (ca != cb) return ca < cb;
    ++i;
    ++j;
  }
  return (a.size() - i) < (b.size() - j);
}

std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t max_count) {
  struct Candidate {
    std::size_t score;
    std::string name;
  };
  std::vector<Candidate> candidates;
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  for (const auto& k : known) {
    // The distance is at least the difference in length, so a name that long
    // away cannot be near: no quadratic distance for it (a mistyped 8 KB word
    // against every flag).
    const std::size_t length_gap = name.size() > k.size() ? name.size() - k.size() : k.size() - name.size();
    std::size_t d = length_gap > limit ? length_gap : edit_distance(name, k);
    const bool related = !name.empty() && (k.find(name) != std::string::npos || name.find(k) != std::string::npos);
    if (related) d = std::min(d, std::size_t{1});
    if (d <= limit) candidates.push_back({d, k});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return x.score != y.score ? x.score < y.score : natural_less(x.name, y.name);
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < candidates.size() && i < max_count; ++i) out.push_back(candidates[i].name);
  return out;
}

}  // namespace timm
