// Finding timm's pretrained weights in the local Hugging Face hub cache, the
// folder huggingface_hub downloads into, so that a machine which once ran
// Python timm with pretrained=True fine-tunes offline from the same files.
//
//   std::filesystem::path file = timm::find_hf_cached_weights("timm/resnet50.a1_in1k", timm::hf_hub_cache_dir());
//   // ~/.cache/huggingface/hub/models--timm--resnet50.a1_in1k/snapshots/<commit>/model.safetensors
#pragma once

#include <filesystem>
#include <string>

namespace timm {

// The hub cache as huggingface_hub finds it: $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub.
std::filesystem::path hf_hub_cache_dir();

// The weights of the model repository `hf_hub_id` ("timm/resnet50.a1_in1k")
// in the hub cache `cache`, in timm's order of preference: model.safetensors,
// then pytorch_model.bin, in the snapshot of the commit refs/main names (what
// hf_hub_download resolves offline), else in the repository's only snapshot
// holding one. Throws Error naming the files it looked for and how to fill
// the cache when there is none, and UsageError for an id that is not
// "<owner>/<name>".
std::filesystem::path find_hf_cached_weights(const std::string& hf_hub_id, const std::filesystem::path& cache);

}  // namespace timm
