"""Optimizer step time, timm-cpp against Python timm, on the parameters of
resnet50 and vit_base_patch16_224 (names and shapes from Python timm's
models, so both get timm's weight-decay groups), with fixed random gradients,
lr 1e-3 and weight decay 0.05. Both sides use the same number of threads
(torch.set_num_threads / at::set_num_threads) and run on the CPU. Prints
ms per step of each, wall time and process CPU time (the steadier figure on
a shared machine), and the ratios timm-cpp / timm (below 1: timm-cpp faster).
The two sides run alternately --repeats times (bench/interleave.py): the
figures are medians, each ratio with its spread.

--whole-groups adds a third side: timm-cpp with each group handed to the
foreach ops whole (ForeachOptimizer's runs of ~1M elements off), the step
before 2026-12-05 17:00 for the optimizers that now run in runs.

--confirm-above R --confirm-repeats K: after the repeats of every name, the
names whose median time ratio is above R (close to the target of 1.0, on
either side of it) run K more interleaved repeats, and their figures are the
medians of all their repeats. bench/run_all.sh times each name once and
confirms those above 0.9: one sample of 2 steps moved a ratio by up to 2x on
this shared machine (cmars 1.04 in run_all, 0.34 over 3 repeats right after).

--one-step-above S: a name whose first warm-up step takes longer than S
seconds (on either side, each deciding for itself) is timed on one step
after its warm-up, not --steps; one whose timed step took longer than S on
either side gets no confirming repeats. The Muon
family's bf16 Newton-Schulz GEMMs take 3.8 s (resnet50) and 20 s (vit_base)
per step on an Intel host without AMX: timed as the rest, they took 29 of
run_all's 64 minutes. At seconds per step one step is a steady figure; the
first (warm-up) step is not, as it also creates the state (timm's first Muon
step on resnet50 took 0.7 s longer than its second).

--opts all times every optimizer name both timm's list_optimizers() and
timm-cpp's registry hold, less those whose step cannot run here on either
side (bitsandbytes and apex/DeepSpeed wrappers need their packages and CUDA;
adahessian needs gradients with a graph); each left out is printed with why.

Usage: bench/optimizer_step.py [--threads 1] [--steps 10] [--warmup 2]
           [--models resnet50 vit_base_patch16_224] [--opts sgd adamw lamb rmsproptf ... | all]
           [--exclude NAME ...] [--whole-groups] [--repeats 3] [--confirm-above 0.9 --confirm-repeats 2]
           [--one-step-above SECONDS]
           [--summary FILE] [--timm-bench-optim build/bin/timm-bench-optim]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import torch
import timm
from timm.optim import create_optimizer_v2

from interleave import Ratio, interleave, median
from summary import append_summary


def model_params(name):
    with torch.device('meta'):
        model = timm.create_model(name)
    return [{'name': n, 'shape': list(p.shape)} for n, p in model.named_parameters() if p.requires_grad]


def build(params):
    # A module with the model's parameter names, so timm forms the same groups.
    root = torch.nn.Module()
    for p in params:
        *path, leaf = p['name'].split('.')
        module = root
        for part in path:
            if not hasattr(module, part):
                module.add_module(part, torch.nn.Module())
            module = getattr(module, part)
        module.register_parameter(leaf, torch.nn.Parameter(torch.randn(p['shape']) * 0.02))
    return root


class StartingPoint:
    """The parameters' values and gradients at the start, which every optimizer steps from: the model is built
    once (torch.randn over vit_base's 86M parameters took longer than the two timed steps)."""

    def __init__(self, params):
        self.model = build(params)
        self.values = [p.detach().clone() for p in self.model.parameters()]
        self.grads = [torch.randn_like(p) * 0.01 for p in self.model.parameters()]

    def restore(self):
        with torch.no_grad():
            for p, value, grad in zip(self.model.parameters(), self.values, self.grads):
                p.copy_(value)
                if p.grad is None:
                    p.grad = grad.clone()
                else:
                    p.grad.copy_(grad)
        return self.model


def time_per_step(optimizer, steps):
    """(wall ms, process CPU ms) per step of `steps` calls of optimizer.step()."""
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) * 1000 / steps, (time.process_time() - cpu_start) * 1000 / steps


def time_python(start, opt, warmup, steps, one_step_above=0):
    """Time per step of `steps` steps after `warmup` untimed ones; but an optimizer whose first step takes
    longer than one_step_above seconds (when > 0) is timed on one step, as timm-bench-optim --one-step-above."""
    model = start.restore()
    optimizer = create_optimizer_v2(model, opt=opt, lr=1e-3, weight_decay=0.05)
    if warmup == 0:
        return time_per_step(optimizer, steps)
    slow = one_step_above > 0 and time_per_step(optimizer, 1)[0] > 1000 * one_step_above
    for _ in range(warmup - 1):
        optimizer.step()
    return time_per_step(optimizer, 1 if slow else steps)


def cpp_optimizer_names(exe):
    timm_run = os.path.join(os.path.dirname(exe), 'timm-run')
    out = subprocess.run([timm_run, '--list-optimizers'], check=True, capture_output=True, text=True).stdout
    return [line.split('\t')[0] for line in out.splitlines() if line.strip()]


def runnable_here(opt):
    """None when Python timm can step `opt` on this machine, else the reason it cannot."""
    model = torch.nn.Linear(4, 4)
    try:
        optimizer = create_optimizer_v2(model, opt=opt, lr=1e-3, weight_decay=0.05)
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        optimizer.step()
    except Exception as e:  # ImportError (bitsandbytes, apex), RuntimeError (adahessian's graph), ...
        return f'{type(e).__name__}: {str(e).splitlines()[0][:100]}'
    return None


def all_optimizers(exe):
    """The names both sides register whose step runs here, in timm's order."""
    ours = set(cpp_optimizer_names(exe))
    names = []
    for opt in timm.optim.list_optimizers():
        if opt not in ours:
            print(f'left out {opt}: not registered in timm-cpp')
            continue
        reason = runnable_here(opt)
        if reason:
            print(f'left out {opt}: Python timm cannot step it here ({reason})')
            continue
        names.append(opt)
    return names


def time_cpp(exe, params, opts, threads, warmup, steps, one_step_above, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'params.json')
        with open(path, 'w') as f:
            json.dump(params, f)
        out = subprocess.run([exe, path, '--threads', str(threads), '--warmup', str(warmup), '--steps', str(steps),
                              '--one-step-above', str(one_step_above), *extra, '--opts', *opts],
                             check=True, capture_output=True, text=True).stdout
    times = {}
    for line in out.splitlines():
        opt, _, rest = line.partition(' ')
        if opt in opts:
            times[opt] = rest if rest.startswith('failed:') else tuple(float(x) for x in rest.split())
    return times


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--steps', type=int, default=10)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--models', nargs='+', default=['resnet50', 'vit_base_patch16_224'])
    parser.add_argument('--opts', nargs='+', default=['sgd', 'adamw', 'lamb', 'rmsproptf'])
    parser.add_argument('--exclude', nargs='*', default=[], help='names to leave out of --opts all')
    parser.add_argument('--whole-groups', action='store_true',
                        help='also time timm-cpp with each group in one run of the foreach ops')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--confirm-above', type=float, default=None,
                        help='run --confirm-repeats more repeats of the names whose time ratio is above this')
    parser.add_argument('--confirm-repeats', type=int, default=2)
    parser.add_argument('--one-step-above', type=float, default=0, metavar='SECONDS',
                        help='time a name whose first warm-up step takes longer than this on one step, not --steps; '
                             'give one whose timed step took longer no confirming repeats (0: never)')
    parser.add_argument('--summary', help='append each row (a time ratio) to this JSON-lines file (bench/run_all.sh)')
    parser.add_argument('--timm-bench-optim', default=os.path.join(here, '..', 'build', 'bin', 'timm-bench-optim'))
    args = parser.parse_args()
    if args.whole_groups and args.confirm_above is not None:
        parser.error('--whole-groups and --confirm-above: the confirming repeats time no whole groups')
    if args.one_step_above < 0:
        parser.error(f'--one-step-above: expected seconds >= 0, got {args.one_step_above}')

    torch.set_num_threads(args.threads)
    if args.opts == ['all']:
        args.opts = [opt for opt in all_optimizers(args.timm_bench_optim) if opt not in args.exclude]
    torch.manual_seed(0)
    print(f'threads {args.threads}, {args.warmup} warm-up steps, {args.steps} timed steps, CPU, '
          f'{args.repeats} interleaved repeat(s), torch {torch.__version__}, timm {timm.__version__}')
    print(f'{"model":<22} {"optimizer":<14} {"timm wall":>10} {"cpp wall":>10} {"ratio (median, spread)":>24}'
          f' {"timm cpu":>10} {"cpp cpu":>10} {"ratio":>24}   (ms per step, medians)')
    for name in args.models:
        params = model_params(name)

        failed = {}  # optimizer -> 'side failed: why'; not timed again on either side

        def cpp_all(names, extra=()):  # one timm-bench-optim run times every optimizer
            opts = [opt for opt in names if opt not in failed]
            times = time_cpp(args.timm_bench_optim, params, opts, args.threads, args.warmup, args.steps,
                             args.one_step_above, extra)
            for opt, t in times.items():
                if isinstance(t, str):
                    failed[opt] = f'timm-cpp {t}'
            return times

        start = None

        def py_all(names):
            nonlocal start
            start = start or StartingPoint(params)
            times = {}
            for opt in names:
                if opt in failed:
                    continue
                try:
                    times[opt] = time_python(start, opt, args.warmup, args.steps, args.one_step_above)
                except Exception as e:  # e.g. an allocation beyond this machine
                    failed[opt] = f'timm failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}'
            return times

        sides = [('timm-cpp', lambda: cpp_all(args.opts)), ('timm', lambda: py_all(args.opts))]
        if args.whole_groups:
            sides.insert(1, ('timm-cpp whole groups', lambda: cpp_all(args.opts, ['--whole-groups'])))
        runs = interleave(sides, args.repeats)

        def samples(opt, side, i):  # i: 0 wall, 1 cpu
            return [run[opt][i] for run in runs[side] if opt in run]

        if args.confirm_above is not None:
            def one_step(opt):  # timed on one step, seconds long: a confirming repeat would take minutes
                return args.one_step_above > 0 and max(samples(opt, side, 0)[0] for side in ('timm-cpp', 'timm')) \
                    > 1000 * args.one_step_above

            close = [opt for opt in args.opts if opt not in failed and not one_step(opt) and
                     Ratio.of(samples(opt, 'timm-cpp', 0), samples(opt, 'timm', 0)).median > args.confirm_above]
            if close:
                print(f'{name}: {len(close)} names above {args.confirm_above}, {args.confirm_repeats} more repeats: '
                      f'{" ".join(close)}', flush=True)
                more = interleave([('timm-cpp', lambda: cpp_all(close)), ('timm', lambda: py_all(close))],
                                  args.confirm_repeats)
                for side, results in more.items():
                    runs[side].extend(results)
        for opt in args.opts:
            if opt in failed:
                print(f'{name:<22} {opt:<14} {failed[opt]}', flush=True)
                continue
            cpp_wall, cpp_cpu = (samples(opt, 'timm-cpp', i) for i in (0, 1))
            py_wall, py_cpu = (samples(opt, 'timm', i) for i in (0, 1))
            wall, cpu = Ratio.of(cpp_wall, py_wall), Ratio.of(cpp_cpu, py_cpu)
            print(f'{name:<22} {opt:<14} {median(py_wall):10.1f} {median(cpp_wall):10.1f} {str(wall):>24}'
                  f' {median(py_cpu):10.1f} {median(cpp_cpu):10.1f} {str(cpu):>24}', flush=True)
            if args.whole_groups:
                whole = samples(opt, 'timm-cpp whole groups', 0)
                print(f'{"":<22} {"":<14} {"whole groups":>10} {median(whole):10.1f} '
                      f'{str(Ratio.of(whole, py_wall)):>24}   runs / whole groups: {Ratio.of(cpp_wall, whole)}',
                      flush=True)
            if args.summary:
                append_summary(args.summary, f'optimizer step {opt}, {name} params, {args.threads} thread(s) (ms)',
                               median(cpp_wall), median(py_wall), wall, lower_is_better=True)

if __name__ == '__main__':
    main()
