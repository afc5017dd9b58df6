#include "timm/sched/scheduler.hpp"

#include <cmath>
#include <exception>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "timm/base/error.hpp"
#include "timm/plugin/registry.hpp"

namespace timm {

// ---- Scheduler --------------------------------------------------------------

Scheduler::Scheduler(Optimizer& optimizer, bool t_in_epochs, NoiseOptions noise)
    : optimizer_(optimizer), t_in_epochs_(t_in_epochs), noise_(std::move(noise)) {
  const std::size_t n = optimizer_.num_groups();
  base_values_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // group.setdefault('initial_lr', group['lr']): a resumed optimizer keeps
    // the base lr of the run that saved it.
    if (!optimizer_.initial_lr(i)) optimizer_.set_initial_lr(i, optimizer_.lr(i));
    base_values_.push_back(*optimizer_.initial_lr(i));
  }
  update_groups(base_values_);
}

void Scheduler::step(int64_t epoch, std::optional<double> /*metric*/) {
  if (t_in_epochs_) apply(epoch);
}

void Scheduler::step_update(int64_t num_updates, std::optional<double> /*metric*/) {
  if (!t_in_epochs_) apply(num_updates);
}

void Scheduler::apply(int64_t t) {
  std::vector<double> values = lr_at(t);
  const double noise = noise_at(t);
  if (noise != 0.0) {
    for (double& v : values) v = v + v * noise;
  }
  update_groups(values);
}

void Scheduler::update_groups(const std::vector<double>& values) {
  TORCH_CHECK(values.size() == optimizer_.num_groups(), "scheduler produced ", values.size(), " lrs for ",
              optimizer_.num_groups(), " param groups");
  for (std::size_t i = 0; i < values.size(); ++i) {
    optimizer_.set_lr(i, values[i] * optimizer_.lr_scale(i));
  }
}

double Scheduler::noise_at(int64_t t) const {
  const auto& range = noise_.range_t;
  const double td = static_cast<double>(t);
  const bool on = range.size() == 1 ? td >= range[0] : range.size() >= 2 && range[0] <= td && td < range[1];
  if (!on) return 0.0;
  // timm: a fresh torch.Generator seeded noise_seed + t, torch.randn(1) until
  // |n| < noise_pct. The same CPU generator and kernel give the same draws.
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(noise_.seed + t));
  while (true) {
    const double n = at::randn({1}, gen, at::TensorOptions().dtype(at::kFloat)).item<float>() * noise_.std;
    if (std::abs(n) < noise_.pct) return n;
  }
}

void Scheduler::init_warmup(const WarmupOptions& warmup) {
  warmup_ = warmup;
  warmup_steps_.clear();
  if (warmup_.t == 0) return;
  for (double v : base_values_) warmup_steps_.push_back((v - warmup_.lr_init) / static_cast<double>(warmup_.t));
  update_groups(std::vector<double>(base_values_.size(), warmup_.lr_init));
}

std::vector<double> Scheduler::warmup_lrs(int64_t t) const {
  std::vector<double> lrs;
  lrs.reserve(warmup_steps_.size());
  for (double s : warmup_steps_) lrs.push_back(warmup_.lr_init + static_cast<double>(t) * s);
  return lrs;
}

// ---- Factory ----------------------------------------------------------------

SchedulerParams scheduler_params(const SchedulerArgs& args) {
  SchedulerParams p;
  p.args = args;
  p.t_in_epochs = args.step_on_epochs;
  int64_t upe = 1;
  if (!args.step_on_epochs) {
    if (args.updates_per_epoch <= 0) {
      throw UsageError("--sched-on-updates needs the number of updates per epoch, got " +
                       std::to_string(args.updates_per_epoch));
    }
    upe = args.updates_per_epoch;
  }
  p.t_initial = args.num_epochs * upe;
  p.decay_t = args.decay_epochs.value_or(90.0) * static_cast<double>(upe);
  for (int64_t m : args.decay_milestones) p.decay_milestones.push_back(m * upe);
  p.cooldown_t = args.cooldown_epochs * upe;
  p.warmup.lr_init = args.warmup_lr;
  p.warmup.t = args.warmup_epochs * upe;
  p.warmup.prefix = args.warmup_prefix;
  // noise_range = [n * t_initial for n in noise]; one element is a threshold.
  for (double n : args.noise) p.noise.range_t.push_back(n * static_cast<double>(p.t_initial));
  p.noise.pct = args.noise_pct;
  p.noise.std = args.noise_std;
  p.noise.seed = args.noise_seed;
  return p;
}

SchedulerPtr create_scheduler(Optimizer& optimizer, const SchedulerArgs& args) {
  const SchedulerParams params = scheduler_params(args);
  const RegistryEntry& entry = Registry::global().get(PluginKind::kScheduler, args.sched);
  const auto& factory = Registry::global().factory<SchedulerFactory>(PluginKind::kScheduler, args.sched);
  const std::string where = "scheduler '" + args.sched + "' from '" + entry.origin + "'";
  SchedulerPtr scheduler;
  try {
    scheduler = factory(optimizer, params);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error(where + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error(where + ": " + e.what());
  }
  if (!scheduler) throw Error(where + ": its factory returned nothing");

  // timm: cycle-based schedulers count cycles and cooldown; the others the
  // epochs plus a warmup prefix.
  if (const auto cycle = scheduler->cycle_length()) {
    const int64_t t = *cycle + params.cooldown_t;
    scheduler->num_epochs_ = args.step_on_epochs ? t : t / args.updates_per_epoch;
  } else {
    scheduler->num_epochs_ = args.num_epochs + (args.warmup_prefix ? args.warmup_epochs : 0);
  }
  return scheduler;
}

double py_floordiv(double a, double b) {
  // CPython's float_floor_div (Objects/floatobject.c).
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

}  // namespace timm
