// Helpers for the multi-process tests: free loopback ports picked at test
// time and the environment torchrun would give a rank.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <map>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace timm::test {

// A TCP port free right now on 127.0.0.1 (the kernel picks it).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  const int port = ntohs(address.sin_port);
  close(fd);
  return port;
}

// The checksums the ranks of a run logged ("Rank R final parameter checksum
// X"), by rank.
inline std::map<int, std::string> checksums(const std::string& output) {
  std::map<int, std::string> found;
  const std::regex pattern(R"(Rank (\d+) final parameter checksum ([0-9a-f]{16}))");
  for (std::sregex_iterator it(output.begin(), output.end(), pattern), end; it != end; ++it) {
    found[std::stoi((*it)[1].str())] = (*it)[2].str();
  }
  return found;
}

// `words` as one shell command line, each in single quotes (the tests' paths
// and flags hold no quote).
inline std::string quoted_words(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& w : words) line += "'" + w + "' ";
  return line;
}

// torchrun's variables for one rank of a one-machine job.
inline std::vector<std::string> rank_env(int rank, int world, int port) {
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world), "LOCAL_RANK=" + std::to_string(rank),
          "MASTER_ADDR=127.0.0.1",        "MASTER_PORT=" + std::to_string(port), "OMP_NUM_THREADS=1"};
}

// The same as "VAR=value ..." words for a shell command line.
inline std::string env_words(const std::vector<std::string>& env) {
  std::string words;
  for (const auto& e : env) words += e + " ";
  return words;
}

// Runs `world` copies of `worker` with `args`, concurrently, as the ranks of
// one job on a free loopback port (rank_env); their results in rank order.
inline std::vector<CommandResult> run_workers(const std::string& worker, int world,
                                              const std::vector<std::string>& args) {
  const int port = free_port();
  std::vector<std::future<CommandResult>> running;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv{worker};
    argv.insert(argv.end(), args.begin(), args.end());
    running.push_back(std::async(std::launch::async, [argv, r, world, port] {
      return run_command(argv, std::chrono::seconds(90), rank_env(r, world, port));
    }));
  }
  std::vector<CommandResult> results;
  for (auto& f : running) results.push_back(f.get());
  return results;
}

}  // namespace timm::test
