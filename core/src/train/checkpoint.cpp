#include "timm/train/checkpoint.hpp"

#include <chrono>
#include <random>

#include <torch/serialize/archive.h>

#include "timm/io/atomic_file.hpp"
#include "timm/io/safetensors.hpp"
#include "timm/models/state_dict.hpp"

namespace timm {
namespace {

std::string new_checkpoint_id() {
  std::random_device rd;
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return std::to_string(now) + "-" + std::to_string(rd());
}

std::string serialize_state(const Optimizer& optimizer, const TrainingState& state, const std::string& id) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("epoch", c10::IValue(state.epoch));
  archive.write("metric", c10::IValue(state.metric));
  archive.write("metric_name", c10::IValue(state.metric_name));
  archive.write("config_toml", c10::IValue(state.config_toml));
  archive.write("checkpoint_id", c10::IValue(id));
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& dir, const std::string& stem, const torch::nn::Module& model,
                     const Optimizer& optimizer, const TrainingState& state) {
  const std::string id = new_checkpoint_id();
  write_file_atomically(dir / (stem + ".state.pt"), serialize_state(optimizer, state, id));
  write_safetensors(dir / (stem + ".safetensors"), state_dict(model),
                    {{"format", "pt"}, {"checkpoint_id", id}, {"epoch", std::to_string(state.epoch)}});
}

}  // namespace timm
