"""Training throughput end to end: timm-run against Python timm.

Both train the same model on the same images with the same batch size,
epochs, optimizer, schedule, transforms, loader workers and torch thread
count, one after the other in this run. The images: Fashion-MNIST (28x28
greyscale, --train-num-samples of the 60,000), or with --dataset wallpapers
an ImageNet-like folder of real photographs at 224 px (bench/wallpapers.py:
--train-num-samples crops of Debian's wallpapers, one class per wallpaper,
train.py's default train transforms: RandomResizedCrop 224 with a random
interpolation, flip, colour jitter 0.4, ImageNet mean and std). Python timm's train.py is not
in the installed distribution, so its loop is rebuilt from timm's own
create_model, create_loader, create_optimizer_v2 and create_scheduler_v2,
as train.py builds it (label-smoothing CE, prefetcher normalisation).

With --kd-model-name, each side also trains the model against that frozen
teacher (timm's LogitDistillationTask, or FeatureDistillationTask with
--kd-distill-type feature; timm-run's --kd-model-name with the same teacher
weights through --kd-pretrained-path), so the teacher's cost shows as the
ratio of the distilling run's images/s to the plain run's.

The runs are interleaved (timm-run, timm, timm-run, timm, ... and the
distilling runs beside them) --repeats times; the figures are medians, each
ratio with its spread (min-max over the repeats), as this shared machine's
speed moves between runs.

Usage: bench/train_e2e.py [--dataset fashion-mnist|wallpapers] [--model resnet18] [--epochs 1] [-b 64]
         [--threads 2] [-j 2] [--train-num-samples N] [--timm-run PATH]
         [--repeats 1] [--summary FILE] [--kd-model-name resnet50 [--kd-distill-type logit]]
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

from interleave import Ratio, interleave, median
from summary import append_summary
import wallpapers

FMNIST = "/usr/share/datasets/fashion-mnist"
MEAN, STD = (0.2860,), (0.3530,)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def common_flags(args):
    flags = ["--model", args.model, "--epochs", str(args.epochs), "-b", str(args.batch_size), "--lr", str(args.lr),
             "--warmup-epochs", "0", "--sched-on-updates", "-j", str(args.workers), "--val-split", ""]
    if args.dataset == "wallpapers":  # the folder holds exactly --train-num-samples images
        return flags + ["--data-dir", args.images]
    return flags + ["--train-num-samples", str(args.train_num_samples)]


def model_kwargs(args):
    """create_model's arguments for the dataset: its classes and channels."""
    if args.dataset == "wallpapers":
        return {"num_classes": len(os.listdir(os.path.join(args.images, "train"))), "in_chans": 3}
    return {"num_classes": 10, "in_chans": 1}


def kd_flags(args, teacher_file):
    return ["--kd-model-name", args.kd_model_name, "--kd-distill-type", args.kd_distill_type,
            "--kd-pretrained-path", teacher_file]


def write_teacher(args, path):
    """The teacher's weights (timm's initialisation, seed 0) under timm's keys, for both sides."""
    import torch
    import timm
    from safetensors.torch import save_file
    torch.manual_seed(0)
    teacher = timm.create_model(args.kd_model_name, **model_kwargs(args))
    save_file({k: v.contiguous() for k, v in teacher.state_dict().items()}, path)


def run_timm_cpp(args, teacher_file=None):
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.timm_run] + common_flags(args) + ["--output", out, "--experiment", "bench", "--log-interval", "100"]
        if teacher_file:
            cmd += kd_flags(args, teacher_file)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
        start = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"timm-run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    rate = float(re.search(r"Train throughput: ([0-9.]+) images/s", proc.stdout).group(1))
    return rate, wall


def run_python_timm(args, teacher_file=None):
    import torch
    import timm
    from PIL import Image
    from safetensors.torch import load_file
    from timm.task import FeatureDistillationTask, LogitDistillationTask
    from timm.data import create_dataset, create_loader, resolve_data_config
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

    model = timm.create_model(args.model, **model_kwargs(args))
    if args.dataset == "wallpapers":  # train.py's loader for an image folder, its default transforms
        dataset = create_dataset("", root=args.images, split="train", is_training=True)
        data_config = resolve_data_config(model=model)
        geometry = {"input_size": data_config["input_size"], "mean": data_config["mean"], "std": data_config["std"],
                    "crop_pct": data_config["crop_pct"]}
    else:
        dataset = FashionMnist(args.train_num_samples)
        geometry = {"input_size": (1, 28, 28), "mean": MEAN, "std": STD}
    loader = create_loader(dataset, batch_size=args.batch_size, is_training=True, interpolation="random",
                           color_jitter=0.4, num_workers=args.workers, device=torch.device("cpu"),
                           use_prefetcher=True, persistent_workers=False, **geometry)
    optimizer = create_optimizer_v2(model, opt="sgd", lr=args.lr, weight_decay=2e-5, momentum=0.9)
    scheduler, num_epochs = create_scheduler_v2(optimizer, sched="cosine", num_epochs=args.epochs, warmup_epochs=0,
                                                step_on_epochs=False, updates_per_epoch=len(loader))
    loss_fn = LabelSmoothingCrossEntropy(smoothing=0.1)
    step = lambda input, target: loss_fn(model(input), target)
    trained = model
    if teacher_file:
        teacher = timm.create_model(args.kd_model_name, **model_kwargs(args))
        teacher.load_state_dict(load_file(teacher_file))
        task_cls = LogitDistillationTask if args.kd_distill_type == "logit" else FeatureDistillationTask
        task = task_cls(student_model=model, teacher_model=teacher, criterion=loss_fn, verbose=False,
                        **({"temperature": 4.0} if args.kd_distill_type == "logit" else {}))
        # train.py: the optimizer over the task's trainable module (a projection too).
        optimizer = create_optimizer_v2(task.get_trainable_module(), opt="sgd", lr=args.lr, weight_decay=2e-5,
                                        momentum=0.9)
        scheduler, num_epochs = create_scheduler_v2(optimizer, sched="cosine", num_epochs=args.epochs,
                                                    warmup_epochs=0, step_on_epochs=False,
                                                    updates_per_epoch=len(loader))
        step = lambda input, target: task(input, target)["loss"]
        trained = task
    images, seconds, num_updates = 0, 0.0, 0
    for epoch in range(num_epochs):
        trained.train()
        last = time.time()
        for input, target in loader:
            loss = step(input, target)
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
    parser.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "wallpapers"])
    parser.add_argument("--images", help="--dataset wallpapers: the folder (default: made by bench/wallpapers.py)")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("-b", "--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--train-num-samples", type=int, default=None,
                        help="images per epoch (default: Fashion-MNIST's 60000; 640 wallpaper crops)")
    parser.add_argument("--timm-run", default=os.path.join(here, "..", "build", "bin", "timm-run"))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--summary", help="append the plain ratio's row to this JSON-lines file (bench/run_all.sh)")
    parser.add_argument("--kd-model-name", default=None, help="a teacher: also time distillation from it")
    parser.add_argument("--kd-distill-type", default="logit", choices=["logit", "feature"])
    args = parser.parse_args()
    if args.train_num_samples is None:
        args.train_num_samples = 60000 if args.dataset == "fashion-mnist" else 640
    if args.dataset == "wallpapers" and args.images is None:
        args.images = wallpapers.ensure_folder(f"{wallpapers.DEFAULT_ROOT}-{args.train_num_samples}",
                                               count=args.train_num_samples)
    what = "Fashion-MNIST images" if args.dataset == "fashion-mnist" else f"224 px photographs ({args.images})"

    print(f"model {args.model}, {args.train_num_samples} {what} x {args.epochs} epoch(s), "
          f"batch {args.batch_size}, {args.threads} torch threads, {args.workers} loader workers, "
          f"{args.repeats} interleaved repeat(s)")
    with tempfile.TemporaryDirectory() as tmp:
        teacher_file = None
        runs = [("timm-run", None), ("Python timm", None)]
        if args.kd_model_name:
            teacher_file = os.path.join(tmp, "teacher.safetensors")
            write_teacher(args, teacher_file)
            print(f"teacher {args.kd_model_name} ({args.kd_distill_type} distillation)")
            runs += [("timm-run", teacher_file), ("Python timm", teacher_file)]
        def timer(run):
            side, teacher = run
            if side == "timm-run":
                return lambda: run_timm_cpp(args, teacher)[0]
            return lambda: run_python_timm(args, teacher)

        def show(repeat, run, rate):
            side, teacher = run
            print(f"  repeat {repeat + 1}: {side:11s} {'distilling' if teacher else 'plain':10s} "
                  f"{rate:8.1f} images/s", flush=True)

        rates = interleave([(run, timer(run)) for run in runs], args.repeats, on_result=show)

    def report(label, numerator, denominator):
        ratio = Ratio.of(rates[numerator], rates[denominator])
        print(f"{label}: {ratio}")
        return ratio

    for run in runs:
        side, teacher = run
        print(f"{side:11s} {'distilling' if teacher else 'plain':10s} median {median(rates[run]):8.1f} images/s")
    ratio = report("ratio timm-run / timm", runs[0], runs[1])
    if args.summary:
        name, target = ("Fashion-MNIST", 1.3) if args.dataset == "fashion-mnist" else ("224 px wallpapers", 1.0)
        append_summary(args.summary, f"end to end {name} {args.model} (img/s)", median(rates[runs[0]]),
                       median(rates[runs[1]]), ratio, target=target)
    if teacher_file:
        report("ratio timm-run / timm, distilling", runs[2], runs[3])
        report("timm-run: distilling / plain (the teacher's cost)", runs[2], runs[0])
        report("Python timm: distilling / plain (the teacher's cost)", runs[3], runs[1])


if __name__ == "__main__":
    main()
