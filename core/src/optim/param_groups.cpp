#include "timm/optim/param_groups.hpp"

#include <cmath>
#include <limits>
#include <regex>

#include "timm/base/error.hpp"
#include "timm/base/names.hpp"

namespace timm {

namespace {

// timm's MATCH_PREV_GROUP[0].
constexpr double kMatchPrevGroup = 99999;

struct CompiledRule {
  std::regex regex;
  std::string pattern;
  double group_ordinal;
  std::optional<std::vector<double>> suffix;
};

std::vector<CompiledRule> compile(const GroupMatcher& matcher) {
  std::vector<CompiledRule> rules;
  for (std::size_t ordinal = 0; ordinal < matcher.size(); ++ordinal) {
    // An empty rule list is timm's `None` spec: skipped, its ordinal kept.
    for (const MatcherRule& rule : matcher[ordinal].second) {
      try {
        rules.push_back({std::regex(rule.pattern), rule.pattern, static_cast<double>(ordinal), rule.suffix});
      } catch (const std::regex_error& e) {
        throw Error("group_matcher '" + matcher[ordinal].first + "': invalid regex '" + rule.pattern +
                    "': " + e.what());
      }
    }
  }
  return rules;
}

// The ordinal tuple of timm's _get_grouping.
std::vector<double> grouping(const std::string& name, const std::vector<CompiledRule>& rules) {
  for (const CompiledRule& rule : rules) {
    std::smatch match;
    // re.match: anchored at the start, not at the end.
    if (!std::regex_search(name, match, rule.regex, std::regex_constants::match_continuous)) continue;
    std::vector<double> key{rule.group_ordinal};
    for (std::size_t i = 1; i < match.size(); ++i) {
      if (!match[i].matched) {
        throw Error("group_matcher regex '" + rule.pattern + "' left a group of '" + name + "' unmatched");
      }
      try {
        key.push_back(std::stod(match[i].str()));
      } catch (const std::exception&) {
        throw Error("group_matcher regex '" + rule.pattern + "' captured '" + match[i].str() + "' in '" + name +
                    "', not a number");
      }
    }
    if (rule.suffix) key.insert(key.end(), rule.suffix->begin(), rule.suffix->end());
    return key;
  }
  return {std::numeric_limits<double>::infinity()};
}

}  // namespace

std::map<std::string, int64_t> group_parameters(const torch::nn::Module& model, const GroupMatcher& matcher) {
  const std::vector<CompiledRule> rules = compile(matcher);
  // std::map orders the keys as Python sorts tuples (lexicographically, a
  // prefix first).
  std::map<std::vector<double>, std::vector<std::string>> by_key;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    by_key[grouping(item.key(), rules)].push_back(item.key());
  }
  std::map<std::string, int64_t> layer_of;
  int64_t layer = -1;
  for (const auto& [key, names] : by_key) {
    if (layer < 0 || key.back() != kMatchPrevGroup) ++layer;
    for (const auto& name : names) layer_of[name] = layer;
  }
  return layer_of;
}

std::vector<ParamGroup> param_groups_layer_decay(const torch::nn::Module& model, const GroupMatcher& matcher,
                                                 const std::vector<std::string>& no_weight_decay,
                                                 const LayerDecayOptions& options) {
  if (matcher.empty()) throw UsageError("--layer-decay needs the model's group_matcher(), and it has none");
  const std::map<std::string, int64_t> layer_of = group_parameters(model, matcher);
  int64_t layer_max = 0;
  for (const auto& [name, layer] : layer_of) layer_max = std::max(layer_max, layer);
  std::vector<double> scales;
  for (int64_t i = 0; i <= layer_max; ++i) {
    scales.push_back(std::max(options.min_scale, std::pow(options.layer_decay, static_cast<double>(layer_max - i))));
  }

  std::vector<ParamGroup> groups;
  std::map<std::string, std::size_t> index_of;  // group name -> position in `groups`
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor param = item.value();
    if (!param.requires_grad()) continue;
    const bool no_decay = param.dim() <= 1 || wildcard_match_any(no_weight_decay, name);
    const auto found = layer_of.find(name);
    const int64_t layer = found == layer_of.end() ? layer_max : found->second;
    const double scale = scales[static_cast<std::size_t>(layer)];
    // timm: `if no_opt_scale and ...`, so 0 disables it.
    if (options.no_opt_scale && *options.no_opt_scale != 0.0 && scale < *options.no_opt_scale) {
      param.set_requires_grad(false);
      continue;
    }
    const std::string group_name = "layer_" + std::to_string(layer) + (no_decay ? "_no_decay" : "_decay");
    auto [it, added] = index_of.emplace(group_name, groups.size());
    if (added) {
      ParamGroup group;
      group.name = group_name;
      group.weight_decay = no_decay ? 0.0 : options.weight_decay;
      group.lr_scale = scale;
      groups.push_back(std::move(group));
    }
    groups[it->second].names.push_back(name);
    groups[it->second].params.push_back(param);
  }
  return groups;
}

}  // namespace timm
