#include <doctest/doctest.h>

#include "timm/base/names.hpp"

using timm::ascii_lower;
using timm::natural_less;
using timm::nearest_names;
using timm::wildcard_match;

TEST_CASE("wildcard_match follows Python's fnmatchcase") {
  CHECK(wildcard_match("resnet*", "resnet18"));
  CHECK(wildcard_match("*", ""));
  CHECK(wildcard_match("resnet?8", "resnet18"));
  CHECK_FALSE(wildcard_match("resnet?8", "resnet108"));
  CHECK(wildcard_match("*net[0-9]*", "resnet50d"));
  CHECK_FALSE(wildcard_match("*net[!0-9]*", "resnet50"));
  CHECK(wildcard_match("efficientnet_b[0-3]", "efficientnet_b2"));
  CHECK_FALSE(wildcard_match("efficientnet_b[0-3]", "efficientnet_b4"));
  CHECK_FALSE(wildcard_match("Resnet*", "resnet18"));
  CHECK(wildcard_match("[abc", "[abc"));  // unterminated bracket is literal
}

TEST_CASE("natural_less is timm's case-insensitive natural order") {
  CHECK(natural_less("resnet18", "resnet101"));
  CHECK(natural_less("resnet50", "resnet50d"));
  CHECK_FALSE(natural_less("resnet101", "resnet18"));
  CHECK(natural_less("b2", "B10"));
  CHECK(natural_less("class2", "Class10"));
  CHECK_FALSE(natural_less("a", "a"));
}

TEST_CASE("nearest_names suggests close names first") {
  const std::vector<std::string> known{"resnet18", "resnet34", "resnet50", "seresnet34", "adamw"};
  const auto near = nearest_names("resnet35", known);
  REQUIRE(!near.empty());
  CHECK(near.front() == "resnet34");
  CHECK(nearest_names("zzzzzzzzzzzz", known).empty());
  CHECK(nearest_names("resnet", known).front() == "resnet18");
}

TEST_CASE("ascii_lower changes only A-Z") {
  CHECK(ascii_lower("ResNet50D.PNG") == "resnet50d.png");
  CHECK(ascii_lower("") == "");
  CHECK(ascii_lower("@[`{_-09az") == "@[`{_-09az");  // the bytes next to 'A'-'Z' and 'a'-'z'
  // Non-ASCII bytes stay as they are, whatever the locale: UTF-8 "A with
  // diaeresis" (0xC3 0x84), the same letter in Latin-1 (0xC4), 0x80 and 0xFF.
  const std::string bytes{'X', '\xC3', '\x84', '\xC4', '\x80', '\xFF', 'Y'};
  const std::string expected{'x', '\xC3', '\x84', '\xC4', '\x80', '\xFF', 'y'};
  CHECK(ascii_lower(bytes) == expected);
  const std::string with_nul("A\0B", 3);
  CHECK(ascii_lower(with_nul) == std::string("a\0b", 3));
}
