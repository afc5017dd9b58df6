#!/usr/bin/env python3
"""Op-level profile of one forward+backward step: timm-cpp beside Python timm.

Both sides run the step bench/models.py times (train mode, 1000 classes,
random batch, cross-entropy, backward, no optimizer) under torch's Kineto
profiler, CPU ops only: `timm-benchmark --bench fwd-bwd --profile` for
timm-cpp, torch.profiler for Python timm, each writing a Chrome trace. The
traces are read alike: each op's self time (its duration less its child
ops') is summed by op name (with --shapes, by name and input shapes) and
divided by the number of profiled steps.

Prints, per step: the wall time, the time inside ops, the time outside any
op (framework overhead between ops), then the ops whose self time differs
most between the sides, with their call counts. A profile explains a
ratio; the ratio itself comes from bench/models.py (the profiler's own
overhead, a few microseconds per op, is in both sides' figures).

Usage: bench/profile_ops.py MODEL [-b 32] [--img-size 224] [--threads 2]
         [--amp] [--channels-last] [--warmup 2] [--steps 2] [--top 30]
         [--shapes] [--keep DIR] [--timm-benchmark PATH]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

from models import python_step


def profile_cpp(args, trace):
    cmd = [args.timm_benchmark, "--model", args.model, "--bench", "fwd-bwd", "--batch-size", str(args.batch_size),
           "--img-size", str(args.img_size), "--num-classes", "1000", "--num-warm-iter", str(args.warmup),
           "--num-bench-iter", "1", "--threads", str(args.threads), "--profile", trace,
           "--profile-steps", str(args.steps)]
    if args.channels_last:
        cmd.append("--channels-last")
    if args.amp:
        cmd += ["--amp", "--amp-dtype", "bfloat16"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"timm-benchmark failed for {args.model}: {proc.stderr.strip()}")


def profile_python(args, trace):
    import torch

    step_args = argparse.Namespace(**vars(args), grad_checkpointing=False)
    step = python_step(step_args, args.model)
    for _ in range(args.warmup + 1):  # timm-benchmark's warm-up and its one timed step
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(args.steps):
            step()
    prof.export_chrome_trace(trace)


class Profile:
    """A Chrome trace's CPU ops: self time and calls per key, wall time and time in ops."""

    def __init__(self, path, by_shapes):
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        self.self_us = collections.Counter()
        self.calls = collections.Counter()
        self.in_ops_us = 0.0
        by_thread = collections.defaultdict(list)
        for e in events:
            by_thread[(e["pid"], e["tid"])].append(e)
        start, end = float("inf"), 0.0
        for thread_events in by_thread.values():
            thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
            stack = []  # [end, key] of the open ops enclosing the current one
            for e in thread_events:
                key = e["name"]
                if by_shapes:
                    key += " " + json.dumps(e.get("args", {}).get("Input Dims", []), separators=(",", ":"))
                ts, dur = e["ts"], e["dur"]
                while stack and stack[-1][0] < ts + dur - 1e-3:
                    stack.pop()
                if stack:
                    self.self_us[stack[-1][1]] -= dur
                else:
                    self.in_ops_us += dur
                self.self_us[key] += dur
                self.calls[key] += 1
                stack.append([ts + dur, key])
                start, end = min(start, ts), max(end, ts + dur)
        self.wall_us = end - start if events else 0.0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("-b", "--batch-size", type=int, default=32)
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2, help="profiled steps per side")
    parser.add_argument("--top", type=int, default=30, help="rows: the ops whose self time differs most")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast on both sides")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--shapes", action="store_true", help="key ops by name and input shapes")
    parser.add_argument("--keep", help="write the two traces into this folder (open in Perfetto)")
    parser.add_argument("--timm-benchmark", default=os.path.join(here, "..", "build", "bin", "timm-benchmark"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        os.makedirs(folder, exist_ok=True)
        cpp_trace, py_trace = os.path.join(folder, "timm-cpp.json"), os.path.join(folder, "timm.json")
        profile_cpp(args, cpp_trace)
        profile_python(args, py_trace)
        cpp, py = Profile(cpp_trace, args.shapes), Profile(py_trace, args.shapes)

    n = args.steps
    print(f"{args.model}: forward+backward, batch {args.batch_size}, {args.img_size} px, {args.threads} threads"
          f"{', bfloat16 autocast' if args.amp else ''}{', channels_last' if args.channels_last else ''}; "
          f"per step, mean of {n} profiled steps")
    print(f"{'':34s} {'timm-cpp ms':>12s} {'timm ms':>10s} {'diff ms':>9s}")
    for label, a, b in [("wall (first to last op)", cpp.wall_us, py.wall_us),
                        ("in ops", cpp.in_ops_us, py.in_ops_us),
                        ("between ops", cpp.wall_us - cpp.in_ops_us, py.wall_us - py.in_ops_us)]:
        print(f"{label:34s} {a / n / 1e3:12.2f} {b / n / 1e3:10.2f} {(a - b) / n / 1e3:+9.2f}")
    keys = set(cpp.self_us) | set(py.self_us)
    rows = sorted(keys, key=lambda k: -abs(cpp.self_us[k] - py.self_us[k]))[:args.top]
    print(f"\n{'op (self time)':60s} {'calls cpp/timm':>15s} {'timm-cpp ms':>12s} {'timm ms':>10s} {'diff ms':>9s}")
    for k in rows:
        calls = f"{cpp.calls[k] // n}/{py.calls[k] // n}"
        print(f"{k[:60]:60s} {calls:>15s} {cpp.self_us[k] / n / 1e3:12.2f} {py.self_us[k] / n / 1e3:10.2f} "
              f"{(cpp.self_us[k] - py.self_us[k]) / n / 1e3:+9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
