// Loading weight files into a model, as timm's models/_helpers.py
// (load_state_dict, load_checkpoint, clean_state_dict) and
// models/_builder.py load_pretrained do.
//
// A weights file is a safetensors file (by its ".safetensors" suffix) or a
// torch.save'd file (.pth, .pth.tar, .bin, ...: timm/io/torch_file.hpp):
// either a state_dict itself or a training checkpoint dict holding one.
#pragma once

#include <cstdint>
#include <filesystem>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "timm/io/named_tensors.hpp"
#include "timm/models/model.hpp"
#include "timm/models/state_dict.hpp"

namespace timm {

// timm's clean_state_dict: strips the DDP ("module.") and torch.compile
// ("_orig_mod.") prefixes, in either order.
NamedTensors clean_state_dict(NamedTensors state_dict);

// timm's load_state_dict(path, use_ema): the file's state_dict, cleaned. In a
// checkpoint dict it takes "state_dict_ema" (use_ema, when present and not
// None), then "model_ema" (use_ema), then "state_dict", then "model". Throws
// Error naming the file when it holds no state_dict (listing its keys).
NamedTensors load_state_dict_file(const std::filesystem::path& path, bool use_ema = true);

// timm's load_checkpoint(model, path, use_ema, strict): --initial-checkpoint.
// Strict loading throws Error listing every missing, unexpected and
// mis-shaped key (prefixed with the file's name).
LoadStateDictResult load_checkpoint(torch::nn::Module& model, const std::filesystem::path& path, bool use_ema = true,
                                    bool strict = true);

// timm's adapt_input_conv(in_chans, weight, base_chans): a stem conv weight
// (O, I, kh, kw) trained on base_chans inputs adapted to in_chans: summed over
// the inputs for 1 channel, else repeated and sliced to in_chans and scaled by
// base_chans / in_chans. Throws Error for a weight it cannot adapt.
at::Tensor adapt_input_conv(int64_t in_chans, const at::Tensor& weight, int64_t base_chans = 3);

// --pretrained-path: timm's load_pretrained with the pretrained_cfg overlay
// train.py gives it (file=path, num_classes=-1): the classifier
// (pretrained_cfg().classifier) weight and bias are dropped from the file, so
// the model keeps its freshly initialised head whatever its --num-classes, and
// the stem conv (pretrained_cfg().first_conv) is adapted to `in_chans` when
// its shape differs. Everything else must match: missing keys other than the
// classifier's, unexpected keys and shape mismatches throw Error. A
// `num_classes` equal to pretrained_cfg().num_classes (the model's own, for
// --pretrained: timm's load_pretrained without the overlay) loads the
// classifier too; -1 is train.py's overlay.
LoadStateDictResult load_pretrained_file(ClassifierImpl& model, const std::filesystem::path& path, int64_t in_chans,
                                         int64_t num_classes = -1);

// --pretrained: timm's load_pretrained of the model's default weights,
// pretrained_cfg().hf_hub_id, from the local Hugging Face hub cache
// (timm/models/hf_hub_cache.hpp), with load_pretrained_file's adaptation for
// the model's `in_chans` and `num_classes`. Throws Error naming `model_name`
// when timm has no pretrained weights for it, or naming the files looked for
// when they are not in the cache.
LoadStateDictResult load_hub_pretrained(ClassifierImpl& model, const std::string& model_name, int64_t in_chans,
                                        int64_t num_classes);

}  // namespace timm
