"""Inference and training throughput: timm-benchmark against Python timm.

Both sides measure the same model at the same batch size and input size on
synthetic input (randn images, random targets), with the same torch thread
count, warm-up and timed iterations, one after the other in this run.
timm's benchmark.py is not in the installed distribution, so its measurement
is rebuilt from timm's components as benchmark.py does it: create_model,
eval + no_grad forwards for inference; create_optimizer_v2('sgd', lr 1e-4,
momentum 0.9, weight decay 1e-4) and cross-entropy on random targets for
training (zero_grad, forward, loss, backward, step); samples/s = samples /
wall time of the timed steps (with --min-bench-time S, more steps than
--num-bench-iter until S seconds have passed, both sides). The two sides
run alternately --repeats times (bench/interleave.py), fewer for a row
whose ratios all lie more than --settle-margin beyond 1.0 (interleave's
settled_beyond).

Usage: bench/tools_benchmark.py [--models resnet18 resnet50] [-b 32] [--threads 2]
         [--num-warm-iter 3] [--num-bench-iter 10] [--min-bench-time 0] [--repeats 3] [--settle-margin 0.3]
         [--summary FILE] [--timm-benchmark PATH]
Prints the median images/s of each and the median ratio timm-benchmark / timm
with its spread.
"""
import argparse
import json
import os
import subprocess
import tempfile

import timm
import timm.optim
import torch

from interleave import Ratio, interleave, median, seconds, settled_beyond, timed_window
from summary import append_summary


def python_bench(model_name, batch, warm, iters, min_seconds, mode):
    model = timm.create_model(model_name)
    x = torch.randn(batch, 3, 224, 224)
    if mode == 'inference':
        model.eval()

        def step():
            with torch.no_grad():
                model(x)
    else:
        model.train()
        opt = timm.optim.create_optimizer_v2(model, 'sgd', lr=1e-4, momentum=0.9, weight_decay=1e-4)
        loss_fn = torch.nn.CrossEntropyLoss()
        target = torch.randint(1000, (batch,))

        def step():
            opt.zero_grad()
            loss = loss_fn(model(x), target)
            loss.backward()
            opt.step()
    for _ in range(warm):
        step()
    done, elapsed = timed_window(step, iters, min_seconds)
    return batch * done / elapsed


def cpp_bench(exe, model_name, batch, threads, warm, iters, min_seconds, mode):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'bench.json')
        # --img-size 224 as the Python side (timm-benchmark's default is the cfg's test size, as benchmark.py's).
        subprocess.run([exe, '--model', model_name, '-b', str(batch), '--img-size', '224', '--bench', mode,
                        '--threads', str(threads),
                        '--num-warm-iter', str(warm), '--num-bench-iter', str(iters),
                        '--min-bench-time', str(min_seconds), '--results-file', out],
                       check=True, capture_output=True, text=True)
        with open(out) as f:
            result = json.load(f)
    key = 'infer_samples_per_sec' if mode == 'inference' else 'train_samples_per_sec'
    return result[key]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument('--models', nargs='+', default=['resnet18', 'resnet50'])
    p.add_argument('-b', '--batch-size', type=int, default=32)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--num-warm-iter', type=int, default=3)
    p.add_argument('--num-bench-iter', type=int, default=10)
    p.add_argument('--min-bench-time', type=seconds, default=0,
                   help='time more steps than --num-bench-iter until this many seconds have passed, both sides')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--settle-margin', type=float, default=0,
                   help="stop a row's repeats once its ratios all lie this far beyond 1.0 (0: run them all)")
    p.add_argument('--summary', help="append each row to this JSON-lines file (bench/run_all.sh)")
    p.add_argument('--timm-benchmark', default=os.path.join(here, '..', 'build', 'bin', 'timm-benchmark'))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f'batch {args.batch_size}, {args.threads} threads, {args.num_warm_iter} warm-up + {args.num_bench_iter} '
          f'timed steps{f" (more until {args.min_bench_time:g} s passed)" if args.min_bench_time else ""}, '
          f'224x224, {args.repeats} interleaved repeat(s)'
          f'{f" (fewer past {args.settle_margin:.0%} beyond 1.0)" if args.settle_margin else ""}, '
          f'load average before: {os.getloadavg()[0]:.1f}')
    print(f'{"model":<10} {"mode":<10} {"timm-benchmark img/s":>21} {"timm img/s":>11} {"ratio (median, spread)":>24}')
    for model_name in args.models:
        for mode in ('inference', 'train'):
            def cpp():
                return cpp_bench(args.timm_benchmark, model_name, args.batch_size, args.threads, args.num_warm_iter,
                                 args.num_bench_iter, args.min_bench_time, mode)

            def py():
                return python_bench(model_name, args.batch_size, args.num_warm_iter, args.num_bench_iter,
                                    args.min_bench_time, mode)

            rates = interleave([('timm-cpp', cpp), ('timm', py)], args.repeats,
                               settled=settled_beyond('timm-cpp', 'timm', 1.0, args.settle_margin))
            ratio = Ratio.of(rates['timm-cpp'], rates['timm'])
            cpp_rate, py_rate = median(rates['timm-cpp']), median(rates['timm'])
            print(f'{model_name:<10} {mode:<10} {cpp_rate:>21.2f} {py_rate:>11.2f} {str(ratio):>24}', flush=True)
            if args.summary:
                append_summary(args.summary, f'timm-benchmark {model_name} {mode} (img/s)', cpp_rate, py_rate, ratio)
    print(f'load average after: {os.getloadavg()[0]:.1f}')


if __name__ == '__main__':
    main()
