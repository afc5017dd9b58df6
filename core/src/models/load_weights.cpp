#include "timm/models/load_weights.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include <ATen/ATen.h>

#include "timm/base/error.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/io/torch_file.hpp"
#include "timm/log/log.hpp"
#include "timm/models/hf_hub_cache.hpp"

namespace timm {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool strip_prefix(std::string& key, std::string_view prefix) {
  if (key.rfind(prefix, 0) != 0) return false;
  key.erase(0, prefix.size());
  return true;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + in_quotes(item);
  return out.empty() ? "none" : out;
}

const NamedTensors* find_state_dict(const TorchFile& file, const std::string& key) {
  for (const auto& [name, tensors] : file.state_dicts) {
    if (name == key) return &tensors;
  }
  return nullptr;
}

bool is_none(const TorchFile& file, const std::string& key) {
  return std::find(file.none_keys.begin(), file.none_keys.end(), key) != file.none_keys.end();
}

bool has_key(const TorchFile& file, const std::string& key) {
  return std::find(file.keys.begin(), file.keys.end(), key) != file.keys.end();
}

// timm's choice of the state_dict inside a torch.save'd checkpoint dict.
NamedTensors pick_state_dict(const TorchFile& file, const std::filesystem::path& path, bool use_ema) {
  if (!file.is_dict) {
    throw Error("weights file " + in_quotes(path.string()) + ": expected a dict (a state_dict or a checkpoint)");
  }
  std::vector<std::string> order;
  if (use_ema) order = {"state_dict_ema", "model_ema"};
  order.insert(order.end(), {"state_dict", "model"});
  for (const auto& key : order) {
    if (!has_key(file, key) || is_none(file, key)) continue;
    if (const NamedTensors* tensors = find_state_dict(file, key)) {
      log_info("Loaded " + key + " from checkpoint '" + path.string() + "'");
      return *tensors;
    }
    throw Error("weights file " + in_quotes(path.string()) + ": " + in_quotes(key) +
                " is not a dict of tensors keyed by name");
  }
  if (!file.tensors.empty() || file.keys.empty()) return file.tensors;
  throw Error("weights file " + in_quotes(path.string()) +
              ": holds no state_dict (expected a dict of tensors, or a checkpoint with 'state_dict', "
              "'state_dict_ema', 'model' or 'model_ema'); its keys: " +
              joined(file.keys));
}

// Re-throws a load error with the file's name in front.
template <typename Fn>
LoadStateDictResult with_file_context(const std::filesystem::path& path, Fn&& load) {
  try {
    return load();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw Error("weights file " + in_quotes(path.string()) + ": " + e.what());
  }
}

// pretrained_strict false (timm's strict=False for the extra keys only):
// drops the file's keys the model has no entry for, and says which.
void skip_keys_the_model_lacks(const ClassifierImpl& model, NamedTensors& state, const std::filesystem::path& path) {
  std::set<std::string> own;
  for (const auto& item : state_dict(model)) own.insert(item.first);
  std::vector<std::string> skipped;
  std::erase_if(state, [&](const auto& item) {
    if (own.count(item.first)) return false;
    skipped.push_back(item.first);
    return true;
  });
  if (skipped.empty()) return;
  log_info("Skipped " + std::to_string(skipped.size()) + " key(s) of " + in_quotes(path.string()) +
           " the model does not have (its pretrained_strict is false, as timm's): " + joined(skipped));
}

}  // namespace

NamedTensors clean_state_dict(NamedTensors state_dict) {
  for (auto& [key, tensor] : state_dict) {
    // timm strips '_orig_mod.', 'module.', '_orig_mod.' in that order.
    strip_prefix(key, "_orig_mod.");
    strip_prefix(key, "module.");
    strip_prefix(key, "_orig_mod.");
  }
  return state_dict;
}

NamedTensors load_state_dict_file(const std::filesystem::path& path, bool use_ema) {
  if (ends_with(path.string(), ".safetensors")) return clean_state_dict(read_safetensors(path));
  return clean_state_dict(pick_state_dict(read_torch_file(path), path, use_ema));
}

LoadStateDictResult load_checkpoint(torch::nn::Module& model, const std::filesystem::path& path, bool use_ema,
                                    bool strict) {
  const NamedTensors state = load_state_dict_file(path, use_ema);
  return with_file_context(path, [&] { return load_state_dict(model, state, strict); });
}

at::Tensor adapt_input_conv(int64_t in_chans, const at::Tensor& weight, int64_t base_chans) {
  if (in_chans < 1 || base_chans < 1) throw Error("adapt_input_conv: channel counts must be positive");
  if (weight.dim() != 4) {
    throw Error("adapt_input_conv: expected a 4-D conv weight, got " + std::to_string(weight.dim()) + " dimensions");
  }
  if (in_chans == base_chans) return weight;
  const int64_t out = weight.size(0), in = weight.size(1), kh = weight.size(2), kw = weight.size(3);
  at::Tensor w = weight.to(at::kFloat);
  if (in_chans == 1) {
    if (in > base_chans) {
      if (in % base_chans != 0) throw Error("adapt_input_conv: input channels not a multiple of the base channels");
      w = w.reshape({out, in / base_chans, base_chans, kh, kw}).sum(2);  // space-to-depth stems
    } else {
      w = w.sum(1, /*keepdim=*/true);
    }
  } else {
    if (in != base_chans) throw Error("adapt_input_conv: weight format not supported by conversion");
    const auto repeat =
        static_cast<int64_t>(std::ceil(static_cast<double>(in_chans) / static_cast<double>(base_chans)));
    w = w.repeat({1, repeat, 1, 1}).slice(1, 0, in_chans).contiguous();
    w.mul_(static_cast<double>(base_chans) / static_cast<double>(in_chans));
  }
  return w.to(weight.scalar_type());
}

LoadStateDictResult load_pretrained_file(ClassifierImpl& model, const std::filesystem::path& path, int64_t in_chans,
                                         int64_t num_classes) {
  log_info("Loading pretrained weights from file (" + path.string() + ")");
  NamedTensors state = load_state_dict_file(path);
  const PretrainedCfg& cfg = model.pretrained_cfg();
  const auto own = model.named_parameters();

  if (!cfg.first_conv.empty()) {
    const std::string key = cfg.first_conv + ".weight";
    for (auto& [name, tensor] : state) {
      if (name != key || !own.contains(key) || tensor.sizes() == own[key].sizes()) continue;
      const int64_t pretrained_in_chans = cfg.input_size.empty() ? 3 : cfg.input_size[0];
      if (in_chans == pretrained_in_chans) continue;  // the strict load names the mismatch
      tensor = adapt_input_conv(in_chans, tensor, pretrained_in_chans);
      log_info(format("Converted input conv %s pretrained weights from %lld to %lld channel(s)", cfg.first_conv.c_str(),
                      static_cast<long long>(pretrained_in_chans), static_cast<long long>(in_chans)));
    }
  }

  // timm's load_pretrained: the head comes from the file only for as many
  // classes as it was trained on (never with train.py's num_classes=-1).
  std::vector<std::string> head_keys;
  if (!cfg.classifier.empty() && num_classes != cfg.num_classes) {
    head_keys = {cfg.classifier + ".weight", cfg.classifier + ".bias"};
  }
  std::erase_if(state, [&](const auto& item) {
    return std::find(head_keys.begin(), head_keys.end(), item.first) != head_keys.end();
  });

  if (!cfg.pretrained_strict) skip_keys_the_model_lacks(model, state, path);

  // Checked before anything is copied, so a failure leaves the model untouched.
  std::set<std::string> given;
  for (const auto& item : state) given.insert(item.first);
  std::set<std::string> expected;
  std::vector<std::string> missing, unexpected;
  for (const auto& [key, tensor] : state_dict(model)) {
    expected.insert(key);
    const bool is_head = std::find(head_keys.begin(), head_keys.end(), key) != head_keys.end();
    if (!given.count(key) && !is_head) missing.push_back(key);
  }
  for (const auto& key : given) {
    if (!expected.count(key)) unexpected.push_back(key);
  }
  if (!missing.empty() || !unexpected.empty()) {
    throw Error("weights file " + in_quotes(path.string()) +
                ": state_dict does not match the model:\n  missing keys (" + std::to_string(missing.size()) +
                "): " + joined(missing) + "\n  unexpected keys (" + std::to_string(unexpected.size()) +
                "): " + joined(unexpected));
  }
  return with_file_context(path, [&] {
    LoadStateDictResult result = load_state_dict(model, state, /*strict=*/false);
    if (!result.missing_keys.empty()) {
      log_info("Missing keys (" + joined(result.missing_keys) +
               ") discovered while loading pretrained weights. This is expected if model is being adapted.");
    }
    return result;
  });
}

LoadStateDictResult load_hub_pretrained(ClassifierImpl& model, const std::string& model_name, int64_t in_chans,
                                        int64_t num_classes) {
  const std::string& hf_hub_id = model.pretrained_cfg().hf_hub_id;
  if (hf_hub_id.empty()) {
    throw Error("--pretrained: timm has no pretrained weights for model " + in_quotes(model_name) +
                "; give a weights file with --pretrained-path or train from scratch");
  }
  const std::filesystem::path path = find_hf_cached_weights(hf_hub_id, hf_hub_cache_dir());
  log_info("Loading pretrained weights from Hugging Face hub cache (" + hf_hub_id + ")");
  return load_pretrained_file(model, path, in_chans, num_classes);
}

}  // namespace timm
