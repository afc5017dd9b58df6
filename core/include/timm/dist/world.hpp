// Where this process sits in a distributed job: rank, world size, local rank
// and the rendezvous address, read from the launcher's environment as timm's
// init_distributed_device (timm/utils/distributed.py) reads it.
//
// Launchers understood, first match wins per value as in timm's
// world_info_from_env: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the master
// from MASTER_ADDR or the first host of SLURM_NODELIST), Intel MPI/PMI
// (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID) and OpenMPI (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK).
//
// The functions here are pure (a map of variables in, values out), so the
// parsing is unit tested without launching anything.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace timm::dist {

using EnvMap = std::map<std::string, std::string>;

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;        // torch's default (TCPStoreOptions::kDefaultPort)
  std::string launcher = "none";  // "torchrun", "slurm", "pmi", "openmpi" or "none"
  // torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank connects as a client.
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: keys of a restarted job do not collide

  bool distributed() const { return world_size > 1; }
  bool is_primary() const { return rank == 0; }
};

// The process's environment as a map (what world_from_env() takes).
EnvMap current_env();

// Reads the world from launcher variables. Throws UsageError naming the
// variable when a value is not a number or out of range (rank >= world size).
WorldInfo world_from_env(const EnvMap& env);

// The first host of a Slurm node list: "node[01-04,07],gpu2" -> "node01",
// "a,b" -> "a", "rack[3-4]-n[1-2]" -> "rack3-n1". Throws UsageError on an
// empty or malformed list.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace timm::dist
