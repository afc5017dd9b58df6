// The dist runtime's agreement helpers on thread ranks: broadcast_string
// copies one rank's text to all; agree_on turns one rank's failure (a
// checkpoint it cannot read) into the same error on every rank, naming that
// rank, and refuses ranks that return different values (resumed epochs).
#include <stdexcept>
#include <string>
#include <vector>

#include "gloo_threads.hpp"
#include "timm/base/error.hpp"
#include "timm/dist/collectives.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_dist_agree {

namespace {

constexpr int kWorld = 3;

// Each rank's error message from agree_on, or "" when it returned.
struct Outcome {
  std::string error;
  int64_t value = -1;
};

std::vector<Outcome> agree(const std::function<int64_t(int rank)>& step) {
  std::vector<Outcome> outcomes(kWorld);
  timm::test::run_gloo_ranks(kWorld, [&](int rank, const timm::test::GroupPtr& group) {
    try {
      outcomes[rank].value = timm::dist::agree_on(group, "resuming from 'ckpt'", [&] { return step(rank); });
    } catch (const timm::Error& e) {
      outcomes[rank].error = e.what();
    }
  });
  return outcomes;
}

}  // namespace

TEST_CASE("broadcast_string copies the root's text, empty or not, to every rank") {
  std::vector<std::string> got(kWorld);
  timm::test::run_gloo_ranks(kWorld, [&](int rank, const timm::test::GroupPtr& group) {
    std::string text =
        rank == 1 ? std::string("/shared/out/x/last.safetensors\n\xc3\xa9") : "mine " + std::to_string(rank);
    timm::dist::broadcast_string(group, text, /*root=*/1);
    std::string empty = rank == 0 ? "" : "not empty";
    timm::dist::broadcast_string(group, empty);
    got[rank] = text + "|" + empty;
  });
  for (const auto& text : got) CHECK(text == "/shared/out/x/last.safetensors\n\xc3\xa9|");
}

TEST_CASE("agree_on returns the common value when every rank succeeds") {
  for (const auto& o : agree([](int) { return int64_t{2}; })) {
    CHECK(o.error.empty());
    CHECK(o.value == 2);
  }
}

TEST_CASE("agree_on: a rank that fails makes every rank throw its error, naming it") {
  const auto outcomes = agree([](int rank) -> int64_t {
    if (rank == 1) throw timm::Error("/local/out/x/last.safetensors does not exist");
    return 2;
  });
  for (const auto& o : outcomes) {
    CHECK_MESSAGE(o.error == "rank 1: resuming from 'ckpt' failed: /local/out/x/last.safetensors does not exist",
                  o.error);
  }
  // The lowest failing rank is named, with its own message; a non-timm exception counts too.
  const auto two = agree([](int rank) -> int64_t {
    if (rank > 0) throw std::runtime_error("cannot read on rank " + std::to_string(rank));
    return 2;
  });
  for (const auto& o : two) CHECK(o.error == "rank 1: resuming from 'ckpt' failed: cannot read on rank 1");
}

TEST_CASE("agree_on: ranks that return different values all throw, naming the first that differs") {
  const auto outcomes = agree([](int rank) -> int64_t { return rank == 2 ? 1 : 3; });
  for (const auto& o : outcomes) {
    CHECK_MESSAGE(o.error.find("rank 2: resuming from 'ckpt' gave 1 where rank 0's gave 3") == 0, o.error);
  }
}

}  // namespace test_dist_agree
