#include "timm/dist/world.hpp"

#include <cctype>
#include <charconv>
#include <initializer_list>
#include <optional>

#include <unistd.h>

#include "timm/base/error.hpp"

extern char** environ;

namespace timm::dist {
namespace {

struct Found {
  std::string name;
  std::string value;
};

// The first of `names` that is set, as timm's world_info_from_env tries them.
std::optional<Found> first_set(const EnvMap& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto it = env.find(name); it != env.end()) return Found{name, it->second};
  }
  return std::nullopt;
}

int to_int(const Found& found, int min_value) {
  int value = 0;
  const char* begin = found.value.data();
  const char* end = begin + found.value.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || value < min_value) {
    throw UsageError("environment variable " + found.name + "=" + in_quotes(found.value) +
                     ": expected an integer >= " + std::to_string(min_value));
  }
  return value;
}

std::string launcher_of(const EnvMap& env) {
  if (env.count("SLURM_PROCID") != 0) return "slurm";
  if (env.count("RANK") != 0 || env.count("WORLD_SIZE") != 0) return "torchrun";
  if (env.count("PMI_RANK") != 0) return "pmi";
  if (env.count("OMPI_COMM_WORLD_RANK") != 0) return "openmpi";
  return "none";
}

}  // namespace

EnvMap current_env() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

std::string first_slurm_host(const std::string& nodelist) {
  // A host is a sequence of literal parts and bracketed ranges; the first host
  // takes the first value of each range. Commas inside brackets do not end it.
  std::string host;
  std::size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    const auto close = nodelist.find(']', i);
    if (close == std::string::npos) throw UsageError("SLURM_NODELIST=" + in_quotes(nodelist) + ": unclosed '['");
    const std::string range = nodelist.substr(i + 1, close - i - 1);
    const std::string first = range.substr(0, range.find_first_of(",-"));
    if (first.empty()) throw UsageError("SLURM_NODELIST=" + in_quotes(nodelist) + ": empty range in brackets");
    for (char c : first) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        throw UsageError("SLURM_NODELIST=" + in_quotes(nodelist) + ": expected numbers in brackets, got " +
                         in_quotes(range));
      }
    }
    host += first;  // zero padding kept: node[01-04] starts at node01
    i = close + 1;
  }
  if (host.empty()) throw UsageError("SLURM_NODELIST=" + in_quotes(nodelist) + ": expected at least one host");
  return host;
}

WorldInfo world_from_env(const EnvMap& env) {
  WorldInfo world;
  world.launcher = launcher_of(env);
  if (auto v = first_set(env, {"WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"})) {
    world.world_size = to_int(*v, 1);
  }
  if (auto v = first_set(env, {"RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})) {
    world.rank = to_int(*v, 0);
    if (world.rank >= world.world_size) {
      throw UsageError("environment variable " + v->name + "=" + v->value + ": the rank must be below the world size " +
                       std::to_string(world.world_size));
    }
  }
  if (auto v = first_set(env, {"LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})) {
    world.local_rank = to_int(*v, 0);
  }
  if (auto v = first_set(env, {"MASTER_ADDR"})) {
    if (v->value.empty())
      throw UsageError("environment variable MASTER_ADDR is empty; expected a host name or address");
    world.master_addr = v->value;
  } else if (auto nodes = first_set(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    world.master_addr = first_slurm_host(nodes->value);
  }
  if (auto v = first_set(env, {"MASTER_PORT"})) {
    world.master_port = to_int(*v, 1);
    if (world.master_port > 65535)
      throw UsageError("environment variable MASTER_PORT=" + v->value + ": expected a port 1-65535");
  }
  if (auto v = first_set(env, {"TORCHELASTIC_USE_AGENT_STORE"})) world.agent_store = v->value == "True";
  if (auto v = first_set(env, {"TORCHELASTIC_RESTART_COUNT"})) world.restart_count = to_int(*v, 0);
  return world;
}

}  // namespace timm::dist
