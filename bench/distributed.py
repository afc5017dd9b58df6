"""Distributed training on one 2-core machine: 2 ranks x 1 thread against
1 process x 2 threads, on the same global batch, model and data.

Runs timm-run three times on the same Fashion-MNIST subset (no validation):
  1. one process, OMP_NUM_THREADS=2, batch 2B;
  2. distributed_train.sh 2, OMP_NUM_THREADS=1 per rank, batch B per rank;
  3. as 2, with TIMM_BENCH_SKIP_ALLREDUCE=1 (the DDP hooks run but the
     gradients are not reduced): the step time without communication.
(And 1 process x 1 thread as a control.) Prints images/s of 1 and 2, and the share of the all-reduce time hidden
behind backward: 1 - (step time of 2 - step time of 3) / (time of the same
all-reduces run alone, which timm-run measures at the end of run 2); and
timm-run's own figure from the time it waited for the reduces.

Usage: bench/distributed.py [--model resnet18] [-b 64] [--train-num-samples 4096] [--epochs 1]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flags(args, batch, out):
    return ["--model", args.model, "--epochs", str(args.epochs), "-b", str(batch), "--lr", "0.1",
            "--warmup-epochs", "0", "--val-split", "", "--train-num-samples", str(args.train_num_samples),
            "-j", "1", "--device", "cpu", "--log-interval", "1000", "--output", out, "--experiment", "bench"]


def run(cmd, env_extra):
    env = dict(os.environ, **env_extra)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def images_per_second(output):
    return float(re.search(r"Train throughput: ([0-9.]+) images/s", output).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("-b", "--batch-size", type=int, default=64, help="per rank; the single process gets 2x")
    parser.add_argument("--train-num-samples", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--timm-run", default=os.path.join(ROOT, "build", "bin", "timm-run"))
    args = parser.parse_args()
    global_batch = 2 * args.batch_size

    with tempfile.TemporaryDirectory() as out:
        single = run([args.timm_run] + flags(args, global_batch, out + "/single"), {"OMP_NUM_THREADS": "2"})
        # A control: how much the second thread helps (or hurts, on a loaded machine).
        single1 = run([args.timm_run] + flags(args, global_batch, out + "/single1"), {"OMP_NUM_THREADS": "1"})
        launch = [os.path.join(ROOT, "distributed_train.sh"), "2", "--master-port", str(free_port()), "--"]
        env = {"OMP_NUM_THREADS": "1", "TIMM_RUN": args.timm_run}
        ddp = run(launch + flags(args, args.batch_size, out + "/ddp"), env)
        launch[3] = str(free_port())
        skipped = run(launch + flags(args, args.batch_size, out + "/skip"), dict(env, TIMM_BENCH_SKIP_ALLREDUCE="1"))

    single_rate, ddp_rate, skip_rate = images_per_second(single), images_per_second(ddp), images_per_second(skipped)
    step_with = global_batch / ddp_rate
    step_without = global_batch / skip_rate
    stats = re.search(r"DDP: ([0-9.]+) ms per step waiting for all-reduces after backward; the same all-reduces "
                      r"alone take ([0-9.]+) ms \(([0-9]+)% hidden", ddp)
    waited_ms, alone_ms, reported_hidden = float(stats.group(1)), float(stats.group(2)), float(stats.group(3))
    exposed_ms = max(0.0, 1000 * (step_with - step_without))
    hidden = max(0.0, 1.0 - exposed_ms / alone_ms) if alone_ms > 0 else 0.0
    buckets = re.search(r"Using native DDP \(our reducer\): ([0-9]+) gradient buckets, ([0-9.]+) MiB", ddp)

    print(f"model {args.model}, global batch {global_batch}, {args.train_num_samples} Fashion-MNIST images x "
          f"{args.epochs} epoch(s), CPU")
    print(f"1 process x 2 threads, batch {global_batch}:     {single_rate:8.1f} images/s")
    print(f"control: 1 process x 1 thread, batch {global_batch}: {images_per_second(single1):8.1f} images/s")
    print(f"2 ranks x 1 thread, batch {args.batch_size} each:   {ddp_rate:8.1f} images/s  "
          f"(ratio {ddp_rate / single_rate:.2f})")
    print(f"2 ranks, all-reduce skipped:          {skip_rate:8.1f} images/s")
    print(f"gradients: {buckets.group(2)} MiB in {buckets.group(1)} buckets; all-reduce alone {alone_ms:.1f} ms/step")
    print(f"step time with all-reduce {1000 * step_with:.1f} ms, without {1000 * step_without:.1f} ms: "
          f"exposed {exposed_ms:.1f} ms, hidden behind backward {100 * hidden:.0f}%")
    print(f"timm-run's own count: waited {waited_ms:.1f} ms/step after backward, {reported_hidden:.0f}% hidden")


if __name__ == "__main__":
    main()
