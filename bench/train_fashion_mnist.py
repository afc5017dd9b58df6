"""Training throughput on Fashion-MNIST: timm-run against Python timm.

Both train the same model on the same Fashion-MNIST images with the same
batch size, epochs, optimizer, schedule, transforms, loader workers and torch
thread count, one after the other in this run. Python timm's train.py is not
in the installed distribution, so its loop is rebuilt from timm's own
create_model, create_loader, create_optimizer_v2 and create_scheduler_v2,
as train.py builds it (label-smoothing CE, prefetcher normalisation).

Usage: bench/train_fashion_mnist.py [--model resnet18] [--epochs 1] [-b 64]
         [--threads 2] [-j 2] [--train-num-samples N] [--timm-run PATH]
Prints images/s of each and the ratio timm-run / timm.
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

FMNIST = "/usr/share/datasets/fashion-mnist"
MEAN, STD = (0.2860,), (0.3530,)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def common_flags(args):
    return ["--model", args.model, "--epochs", str(args.epochs), "-b", str(args.batch_size), "--lr", str(args.lr),
            "--warmup-epochs", "0", "--sched-on-updates", "-j", str(args.workers), "--val-split", "",
            "--train-num-samples", str(args.train_num_samples)]


def run_timm_cpp(args):
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.timm_run] + common_flags(args) + ["--output", out, "--experiment", "bench", "--log-interval", "100"]
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        start = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"timm-run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    rate = float(re.search(r"Train throughput: ([0-9.]+) images/s", proc.stdout).group(1))
    return rate, wall


def run_python_timm(args):
    import torch
    import timm
    from PIL import Image
    from timm.data import create_loader
    from timm.loss import LabelSmoothingCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2

    torch.set_num_threads(args.threads)
    torch.manual_seed(42)

    class FashionMnist(torch.utils.data.Dataset):
        def __init__(self, count):
            self.images = read_idx(f"{FMNIST}/train-images-idx3-ubyte.gz")[:count]
            self.labels = read_idx(f"{FMNIST}/train-labels-idx1-ubyte.gz")[:count]
            self.transform = None

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            img = Image.fromarray(self.images[i], mode="L")
            return (self.transform(img) if self.transform else img), int(self.labels[i])

    dataset = FashionMnist(args.train_num_samples)
    model = timm.create_model(args.model, num_classes=10, in_chans=1)
    loader = create_loader(dataset, input_size=(1, 28, 28), batch_size=args.batch_size, is_training=True,
                           interpolation="random", mean=MEAN, std=STD, num_workers=args.workers,
                           device=torch.device("cpu"), use_prefetcher=True, persistent_workers=False)
    optimizer = create_optimizer_v2(model, opt="sgd", lr=args.lr, weight_decay=2e-5, momentum=0.9)
    scheduler, num_epochs = create_scheduler_v2(optimizer, sched="cosine", num_epochs=args.epochs, warmup_epochs=0,
                                                step_on_epochs=False, updates_per_epoch=len(loader))
    loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1)
    images, seconds, num_updates = 0, 0.0, 0
    for epoch in range(num_epochs):
        model.train()
        last = time.time()
        for input, target in loader:
            loss = loss_fn(model(input), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()
            num_updates += 1
            scheduler.step_update(num_updates=num_updates)
            now = time.time()
            seconds += now - last
            images += input.shape[0]
            last = now
    return images / seconds


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("-b", "--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--train-num-samples", type=int, default=60000)
    parser.add_argument("--timm-run", default=os.path.join(here, "..", "build", "bin", "timm-run"))
    args = parser.parse_args()

    print(f"model {args.model}, {args.train_num_samples} Fashion-MNIST images x {args.epochs} epoch(s), "
          f"batch {args.batch_size}, {args.threads} torch threads, {args.workers} loader workers")
    cpp_rate, cpp_wall = run_timm_cpp(args)
    print(f"timm-run:    {cpp_rate:8.1f} images/s  (process wall time {cpp_wall:.1f} s)")
    py_rate = run_python_timm(args)
    print(f"Python timm: {py_rate:8.1f} images/s")
    print(f"ratio timm-run / timm: {cpp_rate / py_rate:.2f}x")


if __name__ == "__main__":
    main()
