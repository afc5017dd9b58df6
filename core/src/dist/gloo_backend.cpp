// The Gloo communicator. Gloo's headers come from Debian's libgloo-dev (the
// wheel does not ship them; see cmake/TimmTorch.cmake).
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "backends.hpp"
#include "timm/base/error.hpp"

#ifndef TIMM_HAVE_NCCL
namespace timm::dist::detail {
c10::intrusive_ptr<c10d::Backend> create_nccl(const c10::intrusive_ptr<c10d::Store>&, const WorldInfo&,
                                              const c10::Device&, std::chrono::milliseconds) {
  throw UsageError(
      "--dist-backend nccl: this build has no NCCL (torch without CUDA, or nccl.h not found at build time)");
}
bool have_nccl() { return false; }
}  // namespace timm::dist::detail
#endif

namespace timm::dist::detail {
namespace {

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

// The local address the kernel would use to reach `host` (a UDP "connect"
// sends nothing): the interface Gloo must listen on for peers on other
// machines or network namespaces to reach us.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    throw Error("MASTER_ADDR=" + in_quotes(host) + ": cannot resolve the host name");
  }
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  std::string address;
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
      address = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (address.empty()) throw Error("MASTER_ADDR=" + in_quotes(host) + ": no route from this machine");
  return address;
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> create_gloo(const c10::intrusive_ptr<c10d::Store>& store, const WorldInfo& world,
                                              std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // As torch: GLOO_SOCKET_IFNAME names the interfaces; otherwise we listen on
  // the address that routes to the master (loopback for a one-machine job).
  if (const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME"); interfaces != nullptr && *interfaces != '\0') {
    std::stringstream list(interfaces);
    for (std::string name; std::getline(list, name, ',');) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else if (is_loopback(world.master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(world.master_addr, world.master_port)));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, world.rank, world.world_size, options);
}

}  // namespace timm::dist::detail
