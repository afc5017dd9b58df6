// The launcher environment parsing of timm::dist (pure functions over a map of
// variables): torchrun, Slurm (node lists with bracket ranges), PMI, OpenMPI.
#include "timm/base/error.hpp"
#include "timm/dist/world.hpp"

#include <doctest/doctest.h>

using timm::dist::first_slurm_host;
using timm::dist::world_from_env;

TEST_CASE("no launcher: a world of one") {
  const auto w = world_from_env({{"HOME", "/root"}});
  CHECK(w.world_size == 1);
  CHECK(w.rank == 0);
  CHECK(w.local_rank == 0);
  CHECK_FALSE(w.distributed());
  CHECK(w.launcher == "none");
}

TEST_CASE("torchrun's variables") {
  const auto w = world_from_env({{"RANK", "3"},
                                 {"WORLD_SIZE", "4"},
                                 {"LOCAL_RANK", "1"},
                                 {"MASTER_ADDR", "10.0.0.7"},
                                 {"MASTER_PORT", "29512"},
                                 {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                 {"TORCHELASTIC_RESTART_COUNT", "2"}});
  CHECK(w.rank == 3);
  CHECK(w.world_size == 4);
  CHECK(w.local_rank == 1);
  CHECK(w.master_addr == "10.0.0.7");
  CHECK(w.master_port == 29512);
  CHECK(w.launcher == "torchrun");
  CHECK(w.agent_store);
  CHECK(w.restart_count == 2);
  CHECK(w.distributed());
  CHECK_FALSE(w.is_primary());
}

TEST_CASE("Slurm: ranks from SLURM_*, the master from the node list unless MASTER_ADDR is set") {
  timm::dist::EnvMap env{
      {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODELIST", "gpu[07-10,12],login1"}};
  auto w = world_from_env(env);
  CHECK(w.rank == 5);
  CHECK(w.world_size == 8);
  CHECK(w.local_rank == 1);
  CHECK(w.master_addr == "gpu07");
  CHECK(w.master_port == 29500);
  CHECK(w.launcher == "slurm");
  env["MASTER_ADDR"] = "head";
  CHECK(world_from_env(env).master_addr == "head");
}

TEST_CASE("timm's precedence: torchrun's variables before PMI, Slurm and OpenMPI") {
  const auto w = world_from_env({{"RANK", "1"},
                                 {"WORLD_SIZE", "2"},
                                 {"SLURM_PROCID", "7"},
                                 {"SLURM_NTASKS", "9"},
                                 {"LOCAL_RANK", "0"},
                                 {"SLURM_LOCALID", "3"}});
  CHECK(w.rank == 1);
  CHECK(w.world_size == 2);
  CHECK(w.local_rank == 0);
}

TEST_CASE("PMI and OpenMPI") {
  const auto pmi = world_from_env({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}});
  CHECK(pmi.rank == 2);
  CHECK(pmi.world_size == 3);
  CHECK(pmi.local_rank == 2);
  CHECK(pmi.launcher == "pmi");
  const auto ompi = world_from_env(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(ompi.rank == 1);
  CHECK(ompi.world_size == 6);
  CHECK(ompi.local_rank == 1);
  CHECK(ompi.launcher == "openmpi");
}

TEST_CASE("Slurm node lists: the first host") {
  CHECK(first_slurm_host("node01") == "node01");
  CHECK(first_slurm_host("a,b,c") == "a");
  CHECK(first_slurm_host("node[01-04]") == "node01");
  CHECK(first_slurm_host("node[3,5-7]") == "node3");
  CHECK(first_slurm_host("rack[3-4]-n[1-2]") == "rack3-n1");
  CHECK(first_slurm_host("gpu[007-010],cpu[1-2]") == "gpu007");
  CHECK_THROWS_AS(first_slurm_host(""), timm::UsageError);
  CHECK_THROWS_AS(first_slurm_host("node[01-04"), timm::UsageError);
  CHECK_THROWS_AS(first_slurm_host("node[a-b]"), timm::UsageError);
}

TEST_CASE("bad values name the variable") {
  auto message_of = [](const timm::dist::EnvMap& env) {
    try {
      world_from_env(env);
    } catch (const timm::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'") != std::string::npos);
  CHECK(message_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("below the world size 2") != std::string::npos);
  CHECK(message_of({{"WORLD_SIZE", "0"}}).find("WORLD_SIZE='0'") != std::string::npos);
  CHECK(message_of({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000") != std::string::npos);
  CHECK(message_of({{"MASTER_ADDR", ""}}).find("MASTER_ADDR is empty") != std::string::npos);
}
