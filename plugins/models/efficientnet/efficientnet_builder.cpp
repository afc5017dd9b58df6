#include "efficientnet_builder.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

#include "efficientnet_blocks.hpp"
#include "timm/base/error.hpp"
#include "timm/layers/global_context.hpp"
#include "timm/layers/squeeze_excite.hpp"

namespace timm::efficientnet {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t pos; (pos = text.find(sep, start)) != std::string::npos; start = pos + 1) {
    parts.push_back(text.substr(start, pos - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

[[noreturn]] void bad_block(const std::string& block_str, const std::string& why) {
  throw UsageError("block string " + in_quotes(block_str) + ": " + why);
}

int64_t parse_int(const std::string& block_str, const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t out = 0;
  try {
    out = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    bad_block(block_str, "option " + in_quotes(key) + " expects an integer, got " + in_quotes(value));
  }
  return out;
}

// timm's _parse_ksize: "5" is one kernel size, "3.5.7" a list (a MixedConv2d of three groups).
KernelSizes parse_ksize(const std::string& block_str, const std::string& key, const std::string& value) {
  KernelSizes sizes;
  for (const auto& part : split(value, '.')) sizes.push_back(parse_int(block_str, key, part));
  return sizes;
}

double parse_float(const std::string& block_str, const std::string& key, const std::string& value) {
  size_t used = 0;
  double out = 0.0;
  try {
    out = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) {
    bad_block(block_str, "option " + in_quotes(key) + " expects a number, got " + in_quotes(value));
  }
  return out;
}

// The ops after the block type, as timm's parser reads them: "noskip" /
// "skip", n<act>, else <letters><number> split at the first digit.
struct ParsedOps {
  std::map<std::string, std::string> options;
  std::optional<bool> skip;
  std::optional<std::string> act;
};

ParsedOps parse_ops(const std::vector<std::string>& ops) {
  static const std::map<std::string, std::string> kActs = {
      {"re", "relu"}, {"r6", "relu6"}, {"hs", "hard_swish"}, {"sw", "swish"}, {"mi", "mish"}};
  ParsedOps parsed;
  for (size_t i = 1; i < ops.size(); ++i) {
    const std::string& op = ops[i];
    if (op == "noskip") {
      parsed.skip = false;
    } else if (op == "skip") {
      parsed.skip = true;
    } else if (!op.empty() && op[0] == 'n') {
      auto it = kActs.find(op.substr(1));
      if (it != kActs.end()) parsed.act = it->second;  // timm ignores an unknown n<act>
    } else {
      const auto digit = std::find_if(op.begin(), op.end(), [](unsigned char ch) { return std::isdigit(ch); });
      if (digit == op.end()) continue;  // timm ignores ops without a number
      parsed.options[std::string(op.begin(), digit)] = std::string(digit, op.end());
    }
  }
  return parsed;
}

// timm's _scale_stage_depth.
StageArgs scale_stage_depth(const StageArgs& stack_args, const std::vector<int64_t>& repeats, double multiplier,
                            DepthTrunc depth_trunc) {
  int64_t num_repeat = std::accumulate(repeats.begin(), repeats.end(), int64_t{0});
  const double scaled_total = static_cast<double>(num_repeat) * multiplier;
  // 'round' keeps single-block stages single for longer; Python's round() is nearbyint's half-to-even.
  auto num_repeat_scaled = depth_trunc == DepthTrunc::kRound
                               ? std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(scaled_total)))
                               : static_cast<int64_t>(std::ceil(scaled_total));
  // Allocated in reverse, so the first block of a stage is the least likely to be repeated.
  std::vector<int64_t> repeats_scaled(repeats.size());
  for (size_t i = repeats.size(); i-- > 0;) {
    const double share =
        static_cast<double>(repeats[i]) / static_cast<double>(num_repeat) * static_cast<double>(num_repeat_scaled);
    const int64_t rs = std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(share)));  // Python round()
    repeats_scaled[i] = rs;
    num_repeat -= repeats[i];
    num_repeat_scaled -= rs;
  }
  StageArgs scaled;
  for (size_t i = 0; i < stack_args.size(); ++i) scaled.insert(scaled.end(), repeats_scaled[i], stack_args[i]);
  return scaled;
}

// timm's partial(se_layer, rd_ratio=...) as _make_block sets it up; the block
// calls it with the channels the SE sees and its own act_layer.
std::function<torch::nn::AnyModule(int64_t)> se_factory(const SeConfig& se, const BlockArgs& a,
                                                        const std::string& block_act) {
  // Ratio of the block input unless the family takes it from the expanded channels.
  const double rd_ratio = se.from_exp ? a.se_ratio : a.se_ratio / a.exp_ratio;
  if (se.layer == "gc") {
    return [rd_ratio, block_act](int64_t channels) {
      return torch::nn::AnyModule(
          layers::GlobalContext(layers::GlobalContextOptions(channels).rd_ratio(rd_ratio).act_layer(block_act)));
    };
  }
  const bool make_div = se.round_with_make_divisible;
  const std::string act = se.force_act.value_or(block_act);
  const std::string gate = se.gate;
  return [rd_ratio, make_div, act, gate](int64_t channels) {
    const double rd = static_cast<double>(channels) * rd_ratio;
    const int64_t rd_channels = make_div ? layers::make_divisible(rd) : static_cast<int64_t>(std::nearbyint(rd));
    return torch::nn::AnyModule(SqueezeExcite(channels, rd_channels, act, gate));
  };
}

BlockConfig block_config(const BuilderConfig& config, const BlockArgs& a, int64_t in_chs, double drop_path_rate) {
  BlockConfig c;
  c.in_chs = in_chs;
  c.out_chs = config.round_chs_fn(a.out_chs);
  c.stride = a.stride;
  c.kernel_size = a.block_type == "cn" ? a.kernel_size : a.dw_kernel_size;
  c.exp_kernel_size = a.exp_kernel_size;
  c.pw_kernel_size = a.pw_kernel_size;
  c.exp_ratio = a.exp_ratio;
  c.group_size = a.group_size;
  c.noskip = a.noskip;
  c.skip = a.skip;
  c.pw_act = a.pw_act;
  // timm's hack for TF's EdgeTPU definitions: a forced input width is rounded like the channels.
  c.force_in_chs = a.force_in_chs > 0 ? config.round_chs_fn(a.force_in_chs) : 0;
  c.act_layer = a.act_layer.value_or(config.act_layer);
  c.pad_type = config.pad_type;
  c.drop_path_rate = drop_path_rate;
  c.norm = config.norm;
  c.aa_layer = config.aa_layer;
  c.layer_scale_init_value = config.layer_scale_init_value;
  c.dw_kernel_size_start = a.dw_kernel_size_start;
  c.dw_kernel_size_mid = a.dw_kernel_size_mid;
  c.dw_kernel_size_end = a.dw_kernel_size_end;
  c.num_heads = a.num_heads;
  c.key_dim = a.kv_dim;
  c.value_dim = a.kv_dim;
  c.kv_stride = a.kv_stride;
  if (a.se_ratio > 0.0) c.make_se = se_factory(config.se, a, c.act_layer);
  return c;
}

}  // namespace

std::pair<BlockArgs, int64_t> decode_block_str(const std::string& block_str) {
  const std::vector<std::string> ops = split(block_str, '_');
  const ParsedOps parsed = parse_ops(ops);
  auto has = [&](const std::string& key) { return parsed.options.count(key) > 0; };
  auto require = [&](const std::string& key) -> const std::string& {
    auto it = parsed.options.find(key);
    if (it == parsed.options.end()) bad_block(block_str, "missing option " + in_quotes(key));
    return it->second;
  };
  auto integer = [&](const std::string& key) { return parse_int(block_str, key, require(key)); };
  auto ksize = [&](const std::string& key) { return parse_ksize(block_str, key, require(key)); };
  // A uir kernel: one size (timm passes its kernel list on, which a ConvNormAct cannot take), >= 0.
  auto single_ksize = [&](const std::string& key) {
    const KernelSizes sizes = ksize(key);
    if (sizes.size() != 1 || sizes[0] < 0) {
      bad_block(block_str, "option " + in_quotes(key) + " expects one kernel size >= 0");
    }
    return sizes[0];
  };
  auto number = [&](const std::string& key, double fallback) {
    return has(key) ? parse_float(block_str, key, require(key)) : fallback;
  };

  BlockArgs a;
  a.block_type = ops[0];
  for (const auto* unsupported : {"cc", "d"}) {
    // mqa's d<dim> is its key / value dim, not space-to-depth.
    if (a.block_type != "mqa" && has(unsupported) && integer(unsupported) > 0) {
      bad_block(block_str, std::string("option '") + unsupported + "' (CondConv / space-to-depth) is not supported");
    }
  }
  const int64_t num_repeat = integer("r");
  a.out_chs = integer("c");
  a.stride = integer("s");
  a.act_layer = parsed.act;
  const KernelSizes end_kernel = has("p") ? ksize("p") : KernelSizes{1};
  if (a.block_type == "ir") {
    a.dw_kernel_size = ksize("k");
    a.exp_kernel_size = has("a") ? ksize("a") : KernelSizes{1};
    a.pw_kernel_size = end_kernel;
    a.exp_ratio = number("e", 0.0);
    require("e");
    a.se_ratio = number("se", 0.0);
    a.noskip = parsed.skip == false;
  } else if (a.block_type == "ds" || a.block_type == "dsa") {
    a.dw_kernel_size = ksize("k");
    a.pw_kernel_size = end_kernel;
    a.se_ratio = number("se", 0.0);
    a.pw_act = a.block_type == "dsa";
    a.noskip = a.block_type == "dsa" || parsed.skip == false;
  } else if (a.block_type == "er") {
    a.exp_kernel_size = ksize("k");
    a.pw_kernel_size = end_kernel;
    a.exp_ratio = number("e", 0.0);
    require("e");
    a.force_in_chs = has("fc") ? integer("fc") : 0;
    a.se_ratio = number("se", 0.0);
    a.noskip = parsed.skip == false;
  } else if (a.block_type == "cn") {
    a.kernel_size = {integer("k")};
    a.skip = parsed.skip == true;
  } else if (a.block_type == "uir") {
    a.dw_kernel_size_start = has("a") ? single_ksize("a") : 0;
    a.dw_kernel_size_mid = single_ksize("k");
    a.dw_kernel_size_end = has("p") ? single_ksize("p") : 0;
    a.exp_ratio = number("e", 0.0);
    require("e");
    a.se_ratio = number("se", 0.0);
    a.noskip = parsed.skip == false;
  } else if (a.block_type == "mqa") {
    a.dw_kernel_size = {single_ksize("k")};
    a.num_heads = integer("h");
    a.kv_dim = integer("d");
    a.kv_stride = has("v") ? integer("v") : 1;
    a.noskip = parsed.skip == false;
    if (a.num_heads < 1 || a.kv_dim < 1 || a.kv_stride < 1) {
      bad_block(block_str, "heads (h), dim (d) and kv stride (v) must be >= 1");
    }
  } else {
    bad_block(block_str,
              "block type " + in_quotes(a.block_type) + " is not supported (expected ds, dsa, ir, er, cn, uir or mqa)");
  }
  if (has("gs")) a.group_size = integer("gs");
  if (num_repeat < 1) bad_block(block_str, "repeats (r) must be >= 1");
  if (a.stride != 1 && a.stride != 2) bad_block(block_str, "stride (s) must be 1 or 2");
  return {a, num_repeat};
}

ArchArgs decode_arch_def(const std::vector<std::vector<std::string>>& arch_def, double depth_multiplier,
                         bool fix_first_last, std::optional<int64_t> group_size, DepthTrunc depth_trunc) {
  return decode_arch_def(arch_def, std::vector<double>(arch_def.size(), depth_multiplier), fix_first_last, group_size,
                         depth_trunc);
}

ArchArgs decode_arch_def(const std::vector<std::vector<std::string>>& arch_def,
                         const std::vector<double>& depth_multipliers, bool fix_first_last,
                         std::optional<int64_t> group_size, DepthTrunc depth_trunc) {
  if (depth_multipliers.size() != arch_def.size()) {
    throw UsageError("decode_arch_def: " + std::to_string(depth_multipliers.size()) + " depth multipliers for " +
                     std::to_string(arch_def.size()) + " stages; expected one per stage");
  }
  ArchArgs arch;
  for (size_t stage = 0; stage < arch_def.size(); ++stage) {
    StageArgs stack_args;
    std::vector<int64_t> repeats;
    for (const auto& block_str : arch_def[stage]) {
      auto [args, repeat] = decode_block_str(block_str);
      if (group_size && !args.group_size) args.group_size = group_size;
      stack_args.push_back(args);
      repeats.push_back(repeat);
    }
    const bool fixed = fix_first_last && (stage == 0 || stage + 1 == arch_def.size());
    arch.push_back(scale_stage_depth(stack_args, repeats, fixed ? 1.0 : depth_multipliers[stage], depth_trunc));
  }
  return arch;
}

int64_t round_channels(double channels, double multiplier, int64_t divisor, double round_limit) {
  if (multiplier == 0.0) return static_cast<int64_t>(channels);
  return layers::make_divisible(channels * multiplier, divisor, std::nullopt, round_limit);
}

std::vector<torch::nn::Sequential> build_stages(const BuilderConfig& config, int64_t in_chs, const ArchArgs& arch,
                                                int64_t& out_chs) {
  int64_t total_blocks = 0;
  for (const auto& stage : arch) total_blocks += static_cast<int64_t>(stage.size());
  int64_t block_index = 0;
  std::vector<torch::nn::Sequential> stages;
  for (const auto& stage_args : arch) {
    torch::nn::Sequential blocks;
    for (size_t i = 0; i < stage_args.size(); ++i, ++block_index) {
      BlockArgs a = stage_args[i];
      if (i >= 1) a.stride = 1;  // only a stage's first block strides
      // timm: drop_path_rate * block_idx / block_count, over all blocks of the net.
      const double dpr = config.drop_path_rate * static_cast<double>(block_index) / static_cast<double>(total_blocks);
      const BlockConfig c = block_config(config, a, in_chs, dpr);
      if (a.block_type == "ir") {
        blocks->push_back(InvertedResidual(c));
      } else if (a.block_type == "ds" || a.block_type == "dsa") {
        blocks->push_back(DepthwiseSeparableConv(c));
      } else if (a.block_type == "er") {
        blocks->push_back(EdgeResidual(c));
      } else if (a.block_type == "cn") {
        blocks->push_back(ConvBnAct(c));
      } else if (a.block_type == "uir") {
        blocks->push_back(UniversalInvertedResidual(c));
      } else if (a.block_type == "mqa") {
        blocks->push_back(MobileAttention(c));
      } else {
        throw UsageError("EfficientNet builder: block type " + in_quotes(a.block_type) + " is not built here");
      }
      in_chs = c.out_chs;
    }
    stages.push_back(blocks);
  }
  out_chs = in_chs;
  return stages;
}

std::vector<StageFeature> stage_features(const BuilderConfig& config, int64_t in_chs, const ArchArgs& arch) {
  std::vector<StageFeature> features;
  if (arch.empty() || arch.front().empty()) return features;
  int64_t reduction = 2;  // the stem's stride
  // A strided first block would downsample the stem's level away: timm takes it from bn1.
  if (arch.front().front().stride > 1) features.push_back({{in_chs, reduction, "bn1"}, 0});
  for (size_t stack = 0; stack < arch.size(); ++stack) {
    reduction *= arch[stack].front().stride;  // only a stack's first block strides
    // A stack ends a level when the next one changes the resolution.
    if (stack + 1 == arch.size() || arch[stack + 1].front().stride > 1) {
      const int64_t num_chs = config.round_chs_fn(arch[stack].back().out_chs);
      features.push_back({{num_chs, reduction, "blocks." + std::to_string(stack)}, static_cast<int64_t>(stack) + 1});
    }
  }
  return features;
}

}  // namespace timm::efficientnet
