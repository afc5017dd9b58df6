"""Peak memory of forward + backward, with and without gradient checkpointing.

For each model, each side runs bench/models.py's forward+backward step
(train mode, 1000 classes, a random batch; timm-benchmark --bench fwd-bwd for
timm-cpp, timm.create_model for Python timm) in a fresh process, once plain
and once with set_grad_checkpointing, and the process's peak resident set
size (getrusage's ru_maxrss) is recorded. Runs alternate (A B A B ...,
bench/interleave.py) --repeats times; the medians are printed per side with
what checkpointing saves, and the ratio timm-cpp / timm of the peaks (lower
is better). Each peak includes the process's fixed cost (the runtime, the
model's weights and gradients), so the saving is the figure to compare.

Usage: bench/peak_memory.py [MODEL ...] [-b 32] [--img-size 224] [--threads 2]
         [--repeats 1] [--summary FILE] [--timm-benchmark PATH] [--timm-run PATH]
Default models: vit_base_patch16_224 convnext_base.
"""
import argparse
import json
import os
import resource
import subprocess
import sys

from interleave import Ratio, interleave, median
from summary import append_summary

DEFAULT_MODELS = ["vit_base_patch16_224", "convnext_base"]
HERE = os.path.dirname(os.path.abspath(__file__))


def child(args):
    """One step run in this process (--child SIDE): prints the peak RSS in MiB as JSON."""
    import models
    step_args = argparse.Namespace(batch_size=args.batch_size, img_size=args.img_size, threads=args.threads,
                                   warmup=0, iters=1, amp=False, channels_last=False,
                                   grad_checkpointing=args.grad_checkpointing, timm_benchmark=args.timm_benchmark)
    if args.child == "timm-cpp":
        models.bench_cpp(step_args, args.model)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # timm-benchmark, the only child
    else:
        models.python_rate(step_args, args.model)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mib": peak_kib / 1024}))


def peak_mib(args, side, name, checkpointing):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", side, "--model", name, "-b", str(args.batch_size),
           "--img-size", str(args.img_size), "--threads", str(args.threads), "--timm-benchmark", args.timm_benchmark]
    if checkpointing:
        cmd.append("--grad-checkpointing")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{side} {name} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_mib"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("-b", "--batch-size", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--summary", help="append each model's rows to this JSON-lines file (bench/run_all.sh)")
    parser.add_argument("--timm-benchmark", default=os.path.join(HERE, "..", "build", "bin", "timm-benchmark"))
    parser.add_argument("--timm-run", default=os.path.join(HERE, "..", "build", "bin", "timm-run"))
    parser.add_argument("--child", choices=["timm-cpp", "timm"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--grad-checkpointing", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    import models
    print(f"peak RSS of one forward+backward step, batch {args.batch_size}, {args.img_size} px, {args.threads} "
          f"threads, {args.repeats} interleaved repeat(s); MiB")
    print(f"{'model':24s} {'side':9s} {'plain':>8s} {'ckpt':>8s} {'saved':>8s} {'ckpt/plain':>11s}")
    for name in args.models:
        if not models.registered_in_cpp(args.timm_run, name):
            print(f"{name:24s} skipped: not registered in timm-cpp")
            continue
        runs = [(f"{side} {mode}", lambda side=side, ckpt=ckpt: peak_mib(args, side, name, ckpt))
                for ckpt, mode in ((False, "plain"), (True, "ckpt")) for side in ("timm-cpp", "timm")]
        peaks = interleave(runs, args.repeats)
        for side in ("timm-cpp", "timm"):
            plain, ckpt = median(peaks[f"{side} plain"]), median(peaks[f"{side} ckpt"])
            print(f"{name:24s} {side:9s} {plain:8.0f} {ckpt:8.0f} {plain - ckpt:8.0f} {ckpt / plain:11.2f}", flush=True)
        for mode in ("plain", "ckpt"):
            ratio = Ratio.of(peaks[f"timm-cpp {mode}"], peaks[f"timm {mode}"])
            print(f"{name:24s} {mode:5s} peak timm-cpp / timm: {ratio}")
            if args.summary:
                append_summary(args.summary, f"peak RSS fwd+bwd {name}{' grad-ckpt' if mode == 'ckpt' else ''} (MiB)",
                               median(peaks[f"timm-cpp {mode}"]), median(peaks[f"timm {mode}"]), ratio,
                               lower_is_better=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
