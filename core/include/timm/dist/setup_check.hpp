// The start-up check that every rank runs the same job: the same plugins
// (names, files and their contents) and the same effective config. Ranks
// that differ would otherwise build different models or issue different
// collectives and hang; instead every rank fails at once with a message
// naming the differing rank and what differs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "timm/config/config.hpp"
#include "timm/dist/process_group.hpp"
#include "timm/plugin/loader.hpp"

namespace timm::dist {

// One line per plugin, sorted: "name file size fnv1a-of-contents".
std::string describe_plugins(const std::vector<LoadedPlugin>& plugins);

// The config as TOML, without what legitimately differs per rank (--local_rank
// from torch.distributed.launch).
std::string describe_config(const Config& config);

// 64-bit FNV-1a.
uint64_t fnv1a(std::string_view bytes);

// All-gathers the hashes of both descriptions; on any difference throws
// timm::Error (on every rank) naming the first differing rank and the first
// differing line against rank 0.
void check_same_setup(ProcessGroup& group, const std::string& plugins, const std::string& config);

}  // namespace timm::dist
