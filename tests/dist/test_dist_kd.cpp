// Knowledge distillation under DDP with real processes (Gloo on loopback):
// LogitDistillationTask and FeatureDistillationTask (with a projection)
// wrapped through prepare_distributed train on 2 ranks with batch B each to
// the same student and projection, step by step, as 1 process with batch 2B
// (kd_worker.cpp against an in-process reference, both built by
// kd_fixture.hpp). Each rank starts from its own student and projection:
// DDP's start-up broadcast makes them rank 0's. The teacher stays out of
// DDP's buckets, frozen and bitwise unchanged, the same on every rank.
#include <algorithm>
#include <filesystem>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/serialize.h>

#include "ddp_fixture.hpp"
#include "dist_support.hpp"
#include "kd_fixture.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

namespace test_dist_kd {

namespace {

using timm::test::DdpCase;

std::string worker() { return (timm::test::bin_dir() / "kd_worker").string(); }

// The job's ranks: run_workers of this test's worker.
std::vector<timm::test::CommandResult> run_workers(int world, const std::vector<std::string>& args) {
  return timm::test::run_workers(worker(), world, args);
}

struct Reference {
  std::vector<at::Tensor> states;         // the trainable module's, initially and after each step
  at::Tensor teacher;                     // the teacher's, flattened
  std::vector<std::string> trainable;     // the trainable module's parameter names
  std::vector<std::string> teacher_only;  // the teacher's parameter names that no trainable parameter has
  std::size_t teacher_count = 0;          // the teacher's parameters
};

// The single-process reference: rank 0's seeds (so the same draws in the same
// order as rank 0's: teacher, student, projection), batch world*B, plain
// BatchNorm.
Reference reference(const std::string& mode, const DdpCase& c) {
  at::set_num_threads(1);
  timm::test::KdSetup kd = timm::test::build_kd(mode, timm::test::kd_student_seed(0));
  timm::TrainingTask& task = *kd.task;
  Reference ref;
  ref.teacher = timm::test::flat_parameters(*kd.teacher);
  ref.trainable = timm::test::trainable_names(task.trainable_module());
  for (const auto& item : kd.teacher->named_parameters()) {
    ++ref.teacher_count;
    if (std::find(ref.trainable.begin(), ref.trainable.end(), item.key()) == ref.trainable.end()) {
      ref.teacher_only.push_back(item.key());
    }
  }
  task.train();
  const auto [x, y] = timm::test::global_data(c);
  ref.states.push_back(timm::test::flat_parameters(task.trainable_module()));
  for (int64_t step = 0; step < c.steps; ++step) {
    timm::TaskResult result = task.forward(x[step], y[step]);
    result.loss.backward();
    timm::test::sgd_step(task.trainable_module(), c.lr);
    ref.states.push_back(timm::test::flat_parameters(task.trainable_module()));
  }
  return ref;
}

std::vector<at::Tensor> load_tensors(const std::filesystem::path& path) {
  std::vector<at::Tensor> tensors;
  torch::load(tensors, path.string());
  return tensors;
}

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::istringstream text(timm::test::read_file(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

void check_distillation(const std::string& mode) {
  DdpCase c;
  c.steps = 3;
  timm::test::TempDir tmp;
  const auto results = run_workers(c.world, {tmp.path().string(), mode, std::to_string(c.steps)});
  for (const auto& r : results) REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const Reference expected = reference(mode, c);

  // The reference drew rank 0's initial weights, and the ranks started apart:
  // the start-up broadcast is what makes rank 1 agree.
  const auto local0 = load_tensors(tmp / "local0.pt");
  CHECK(at::equal(local0.front(), expected.states.front()));
  for (int r = 1; r < c.world; ++r) {
    CHECK_FALSE(at::equal(load_tensors(tmp / ("local" + std::to_string(r) + ".pt")).front(), local0.front()));
  }

  // float32, one thread per process: only summation orders differ (the
  // gradient average of 2 halves against one mean over 2B, SyncBatchNorm's
  // merged statistics against BatchNorm's over 2B, the KL's batchmean and the
  // MSE's mean per half averaged against over 2B); the teacher's eval-mode
  // forward is per sample.
  const double tolerance = 1e-5;
  for (int r = 0; r < c.world; ++r) {
    const std::string rank = std::to_string(r);
    INFO(mode << " rank " << r);
    const auto states = load_tensors(tmp / ("rank" + rank + ".pt"));
    REQUIRE(states.size() == expected.states.size());
    for (std::size_t step = 0; step < states.size(); ++step) {
      REQUIRE(states[step].sizes() == expected.states[step].sizes());
      const double diff = (states[step] - expected.states[step]).abs().max().item<double>();
      MESSAGE(mode << " rank " << r << " after step " << step << ": max |diff| = " << diff);
      CHECK(diff <= tolerance);
    }
    // Training moved the weights: the comparison is not vacuous.
    CHECK((states.back() - states.front()).abs().max().item<double>() > 1e-3);

    // The teacher: bitwise unchanged by training (frozen, eval mode: its
    // running statistics included), the same on every rank as in-process.
    const auto teacher = load_tensors(tmp / ("teacher" + rank + ".pt"));
    REQUIRE(teacher.size() == 2);
    CHECK(at::equal(teacher[0], teacher[1]));
    CHECK(at::equal(teacher[1], expected.teacher));

    // DDP's buckets hold every trainable parameter once and nothing else: no
    // teacher parameter.
    std::vector<std::string> bucketed = read_lines(tmp / ("buckets" + rank + ".txt"));
    for (const auto& name : expected.teacher_only) {
      CHECK_MESSAGE(std::find(bucketed.begin(), bucketed.end(), name) == bucketed.end(),
                    "teacher parameter " << name << " is in a DDP bucket");
    }
    if (mode == "feature") {
      // The projection (student width -> teacher width) trains under DDP.
      for (const std::string name : {"projection.weight", "projection.bias", "student.fc.weight"}) {
        CHECK_MESSAGE(std::find(bucketed.begin(), bucketed.end(), name) != bucketed.end(),
                      name << " is in no DDP bucket");
      }
    }
    std::sort(bucketed.begin(), bucketed.end());
    std::vector<std::string> trainable = expected.trainable;
    std::sort(trainable.begin(), trainable.end());
    CHECK(bucketed == trainable);
  }
  // The teacher check bites: the teacher has parameters no trainable one
  // shares a name with (conv2.* in logit mode, all in feature mode, where the
  // student's are "student.*").
  CHECK_FALSE(expected.teacher_only.empty());
  if (mode == "feature") {
    CHECK(expected.teacher_only.size() == expected.teacher_count);
  }
}

}  // namespace

TEST_CASE("logit distillation: 2 ranks x batch B equal 1 process x batch 2B, teacher frozen and outside DDP") {
  check_distillation("logit");
}

TEST_CASE("feature distillation with a projection: 2 ranks x batch B equal 1 process x batch 2B, projection in DDP") {
  check_distillation("feature");
}

}  // namespace test_dist_kd
