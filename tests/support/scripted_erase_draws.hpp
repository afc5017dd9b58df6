// Replays the random draws a Python oracle recorded from timm's random
// erasing (tests/oracle/aug_oracle.py's RecordingRandom and its naflex
// twin): "r:<random()>", "i:<lo>:<hi>:<value>" and "p:<n>:<v0,v1,...>"
// (torch.randperm), checking that ours asks for the same kind of draw with
// the same bounds, in the same order.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "timm/data/random_erasing.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace timm::test {

class ScriptedEraseDraws final : public PatchEraseDraws {
 public:
  explicit ScriptedEraseDraws(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

  double random() override {
    const std::string t = next();
    REQUIRE_MESSAGE(t.rfind("r:", 0) == 0, "expected a random() draw, timm made " << t);
    return std::strtod(t.c_str() + 2, nullptr);
  }

  int64_t randint(int64_t lo, int64_t hi) override {
    const std::string t = next();
    long tlo = 0, thi = 0, v = 0;
    REQUIRE_MESSAGE(std::sscanf(t.c_str(), "i:%ld:%ld:%ld", &tlo, &thi, &v) == 3, "expected randint, timm made " << t);
    CHECK(tlo == lo);
    CHECK(thi == hi);
    return v;
  }

  std::vector<int64_t> randperm(int64_t n) override {
    const std::string t = next();
    long tn = 0;
    REQUIRE_MESSAGE(std::sscanf(t.c_str(), "p:%ld:", &tn) == 1, "expected randperm, timm made " << t);
    CHECK(tn == n);
    std::vector<int64_t> perm;
    for (size_t pos = t.find(':', 2) + 1; pos < t.size();) {
      const size_t comma = t.find(',', pos);
      perm.push_back(std::stoll(t.substr(pos, comma - pos)));
      pos = comma == std::string::npos ? t.size() : comma + 1;
    }
    return perm;
  }

  // Every recorded draw was asked for.
  bool done() const { return pos_ == tokens_.size(); }

 private:
  std::string next() {
    REQUIRE_MESSAGE(pos_ < tokens_.size(), "more draws than timm made");
    return tokens_[pos_++];
  }

  std::vector<std::string> tokens_;
  std::size_t pos_ = 0;
};

}  // namespace timm::test
