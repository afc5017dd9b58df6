"""Forward + backward throughput per model: timm-cpp against Python timm eager.

For each model name, both sides build the model (train mode, 1000 classes),
draw a random batch (default 32 x 3 x 224 x 224) and time iterations of
zero_grad, forward, cross-entropy, backward (no optimizer step) on CPU with
the same torch thread count, one after the other in this run:
`timm-benchmark --bench fwd-bwd` for timm-cpp, timm.create_model for Python,
each side in a fresh process per measurement. Both count images/s as
benchmark.py does: batch x iterations / wall time of the timed iterations,
after the untimed warm-up ones; with --min-time S both time more iterations
than --iters until S seconds have passed (timm-benchmark --min-bench-time),
so a model of 1 s steps gets as long a timed window as one of 6 s steps. The two sides run
alternately --repeats times (bench/interleave.py), fewer for a model whose
ratios all lie more than --settle-margin beyond 1.0 (interleave's
settled_beyond); prints the median images/s of each and the median ratio
timm-cpp / timm with its spread (target >= 1.0).
With --amp both sides run under bfloat16 autocast (timm-benchmark --amp
--amp-dtype bfloat16; torch.autocast('cpu', dtype=torch.bfloat16)); with
--grad-checkpointing both checkpoint their blocks (set_grad_checkpointing).
With --peak FILE (bench/peak.py --json FILE), each side's forward+backward
FLOP/s (images/s x the model's FLOPs per image: 3x the forward's, counted
by torch's FlopCounterMode on the Python model) is also printed as a fraction of this
CPU's sustained matmul FLOP/s in the same dtype.

A name timm-cpp does not register (its plugin not merged yet, say) is
skipped with a note; so is a name Python timm does not know.

Usage: bench/models.py [MODEL ...] [-b 32] [--img-size 224] [--threads N]
         [--warmup 2] [--iters 5] [--min-time 0] [--repeats 3] [--settle-margin 0.3]
         [--amp] [--channels-last] [--grad-checkpointing]
         [--peak FILE] [--summary FILE] [--timm-benchmark PATH] [--timm-run PATH]
Default models: resnet50 efficientnet_b2 vit_small_patch16_224 convnext_tiny.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from interleave import Ratio, interleave, median, seconds, settled_beyond, timed_window
from summary import append_summary

FORKSERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle", "forkserver.py")

DEFAULT_MODELS = ["resnet50", "efficientnet_b2", "vit_small_patch16_224", "convnext_tiny"]


def registered_in_cpp(timm_run, name):
    proc = subprocess.run([timm_run, "--list-models", name], capture_output=True, text=True)
    return proc.returncode == 0 and any(line.split("\t")[0] == name for line in proc.stdout.splitlines())


def bench_cpp(args, name):
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "bench.json")
        cmd = [args.timm_benchmark, "--model", name, "--bench", "fwd-bwd", "--batch-size", str(args.batch_size),
               "--img-size", str(args.img_size), "--num-classes", "1000", "--num-warm-iter", str(args.warmup),
               "--num-bench-iter", str(args.iters), "--min-bench-time", str(args.min_time),
               "--threads", str(args.threads), "--results-file", results]
        if args.channels_last:
            cmd.append("--channels-last")
        if args.amp:
            cmd += ["--amp", "--amp-dtype", "bfloat16"]
        if args.grad_checkpointing:
            cmd.append("--grad-checkpointing")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"timm-benchmark failed for {name}: {proc.stderr.strip()}")
        with open(results) as f:
            return json.load(f)["fwd_bwd_samples_per_sec"]


def python_step(args, name):
    """One forward+backward step of Python timm's model, as timm-benchmark --bench fwd-bwd runs it."""
    import torch
    import timm
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    model = timm.create_model(name, num_classes=1000).train()
    if args.grad_checkpointing:
        model.set_grad_checkpointing()
    torch.manual_seed(0)
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size)
    target = torch.randint(1000, (args.batch_size,))
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    def step():
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
            loss = F.cross_entropy(model(x).float(), target)
        loss.backward()

    return step


def python_rate(args, name):
    """Python timm's images/s for one model, measured in this process."""
    step = python_step(args, name)
    for _ in range(args.warmup):
        step()
    done, elapsed = timed_window(step, args.iters, args.min_time)
    return args.batch_size * done / elapsed


def bench_python(args, name):
    """python_rate in a process of its own, as each timm-benchmark run is.

    Measured in this process, the Python side of the later models ran on a heap and
    allocator caches grown by the earlier ones (mobilenetv3_large_100 fp32 measured
    0.89-0.95x after five larger models and 1.23x alone). The process is forked from
    tests/oracle/forkserver.py's server, which has imported torch and timm and run
    nothing: a fresh interpreter spent about 5 s of one core on those imports before each
    sample (over 2 of bench/run_all.sh's minutes), and forked samples measured as fresh
    ones did (docs/performance.md).
    """
    cmd = [sys.executable, FORKSERVER, os.path.abspath(__file__), name, "--python-side", "-b", str(args.batch_size),
           "--img-size", str(args.img_size), "--threads", str(args.threads), "--warmup", str(args.warmup),
           "--iters", str(args.iters), "--min-time", str(args.min_time)]
    cmd += [flag for flag, on in (("--amp", args.amp), ("--channels-last", args.channels_last),
                                  ("--grad-checkpointing", args.grad_checkpointing)) if on]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"Python timm failed for {name}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["samples_per_sec"]


def fwd_bwd_flops_per_image(args, name):
    """FLOPs of one image's forward + backward: 3x the forward's (torch's FlopCounterMode, 2 per multiply-add).

    The backward counted as twice the forward is the usual convention; FlopCounterMode's own
    backward count is not used because it overcounts grouped convolutions (efficientnet_b2
    57 GFLOP, convnext_tiny 77 GFLOP per image where 3x the forward gives 4.0 and 26.7).
    """
    import torch
    import timm
    from torch.utils.flop_counter import FlopCounterMode

    model = timm.create_model(name, num_classes=1000).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(1, 3, args.img_size, args.img_size))
    return 3 * counter.get_total_flops()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("-b", "--batch-size", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--min-time", type=seconds, default=0,
                        help="time more iterations than --iters until this many seconds have passed, both sides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settle-margin", type=float, default=0,
                        help="stop a model's repeats once its ratios all lie this far beyond 1.0 (0: run them all)")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast on both sides")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--grad-checkpointing", action="store_true", help="set_grad_checkpointing on both sides")
    parser.add_argument("--peak", help="bench/peak.py's JSON: also print each side's fraction of peak FLOP/s")
    parser.add_argument("--summary", help="append each model's row to this JSON-lines file (bench/run_all.sh)")
    parser.add_argument("--timm-benchmark", default=os.path.join(here, "..", "build", "bin", "timm-benchmark"))
    parser.add_argument("--timm-run", default=os.path.join(here, "..", "build", "bin", "timm-run"))
    parser.add_argument("--python-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.python_side:
        print(json.dumps({"samples_per_sec": python_rate(args, args.models[0])}))
        return 0

    import timm
    print(f"forward+backward, batch {args.batch_size}, {args.img_size} px, {args.threads} threads, "
          f"{args.iters} timed iterations{f' (more until {args.min_time:g} s passed)' if args.min_time else ''} after "
          f"{args.warmup} warm-up, {args.repeats} interleaved repeat(s)"
          f"{f' (fewer past {args.settle_margin:.0%} beyond 1.0)' if args.settle_margin else ''}"
          f"{', bfloat16 autocast' if args.amp else ''}{', channels_last' if args.channels_last else ''}"
          f"{', grad checkpointing' if args.grad_checkpointing else ''}")
    peak = None
    if args.peak:
        with open(args.peak) as f:
            peak = json.load(f)["bfloat16" if args.amp else "float32"]
        print(f"peak {'bfloat16' if args.amp else 'float32'} matmul: {peak / 1e9:.1f} GFLOP/s (bench/peak.py)")
    print(f"{'model':28s} {'timm-cpp img/s':>15s} {'timm img/s':>12s} {'ratio (median, spread)':>24s}"
          f"{'  GFLOP/img  cpp %peak  timm %peak' if peak else ''}")
    ratios = []
    for name in args.models:
        if not registered_in_cpp(args.timm_run, name):
            print(f"{name:28s} skipped: not registered in timm-cpp (its plugin is not built or not merged)")
            continue
        if not timm.is_model(name):
            print(f"{name:28s} skipped: not a Python timm model")
            continue
        rates = interleave([("timm-cpp", lambda: bench_cpp(args, name)), ("timm", lambda: bench_python(args, name))],
                           args.repeats, settled=settled_beyond("timm-cpp", "timm", 1.0, args.settle_margin))
        ratio = Ratio.of(rates["timm-cpp"], rates["timm"])
        ratios.append(ratio.median)
        cpp, py = median(rates["timm-cpp"]), median(rates["timm"])
        line = f"{name:28s} {cpp:15.2f} {py:12.2f} {str(ratio):>24s}"
        if peak:
            flops = fwd_bwd_flops_per_image(args, name)
            line += f"  {flops / 1e9:9.2f}  {100 * cpp * flops / peak:8.1f}%  {100 * py * flops / peak:9.1f}%"
        print(line, flush=True)
        if args.summary:
            append_summary(args.summary, f"fwd+bwd {name}{' bf16' if args.amp else ''}"
                           f"{' grad-ckpt' if args.grad_checkpointing else ''} (img/s)", cpp, py, ratio)
    if ratios:
        print(f"geometric mean of the median ratios over {len(ratios)} models: "
              f"{statistics.geometric_mean(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
