"""Oracle for tests/core/test_distillation.cpp: timm's LogitDistillationTask
and FeatureDistillationTask (timm/task/distillation.py), one training step.

  distill_oracle.py DIR
      Reads DIR/in.safetensors, which the C++ test writes:
        "input" (N, C, H, W) and "target" (N,): the batch;
        "<model>.<key>": the state_dict of each model a case names (the
            student, e.g. "resnet18.conv1.weight", and the teachers);
        "<id>.projection.weight" / "<id>.projection.bias": the feature
            projection of a case that has one (the C++ task's own init);
        metadata "cases": a JSON list of
            {"id", "task": "logit" | "feature", "student", "teacher",
             "num_classes", "smoothing" (0: nn.CrossEntropyLoss, else
             timm.loss.LabelSmoothingCrossEntropy(smoothing)),
             "temperature" (logit tasks), "distill_loss_weight",
             "task_loss_weight" (null: not given),
             "student_mean", "student_std", "teacher_mean", "teacher_std"}.
      For each case builds the student and the teacher with
      timm.create_model(name, num_classes, in_chans), loads their weights,
      sets each model's pretrained_cfg mean / std to the case's (the task
      reads the student's, DistillationTeacher the teacher's), builds the task
      with teacher_model=<the teacher module>, copies the projection weights,
      calls task.train(), result = task(input, target),
      result['loss'].backward(), and writes DIR/<id>.out.safetensors:
        "loss", "task_loss", "kd_loss" (0-d), "output" (the student's logits),
        "grad.student.<name>" for every student parameter and
        "grad.projection.weight" / "grad.projection.bias" when the task has a
        projection. Every trainable parameter must have a gradient (exits 1
        otherwise); the teacher's must have none.

CPU, float32, one thread (train-mode BatchNorm gradients depend on the
summation order).
"""
import json
import sys

import torch
from torch import nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import timm
from timm.loss import LabelSmoothingCrossEntropy
from timm.task import FeatureDistillationTask, LogitDistillationTask


def prefixed(tensors, prefix):
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def build_model(tensors, name, num_classes, in_chans, mean, std):
    model = timm.create_model(name, num_classes=num_classes, in_chans=in_chans)
    model.load_state_dict(prefixed(tensors, name + "."), strict=True)
    # The tasks read the normalisation from pretrained_cfg (the student's in
    # the task, the teacher's in DistillationTeacher).
    model.pretrained_cfg = dict(model.pretrained_cfg, mean=tuple(mean), std=tuple(std))
    return model


def run_case(tensors, case, directory):
    x, target = tensors["input"], tensors["target"]
    in_chans = x.shape[1]
    student = build_model(tensors, case["student"], case["num_classes"], in_chans, case["student_mean"],
                          case["student_std"])
    teacher = build_model(tensors, case["teacher"], case["num_classes"], in_chans, case["teacher_mean"],
                          case["teacher_std"])
    smoothing = case["smoothing"]
    criterion = LabelSmoothingCrossEntropy(smoothing) if smoothing > 0 else nn.CrossEntropyLoss()
    common = dict(student_model=student, teacher_model=teacher, criterion=criterion,
                  distill_loss_weight=case["distill_loss_weight"], task_loss_weight=case["task_loss_weight"],
                  device=torch.device("cpu"), verbose=False)
    if case["task"] == "logit":
        task = LogitDistillationTask(temperature=case["temperature"], **common)
        named = {"student." + k: p for k, p in student.named_parameters()}
    else:
        task = FeatureDistillationTask(**common)
        named = dict(task.trainable_module.named_parameters())
        projection = task.trainable_module.projection
        if projection is not None:
            with torch.no_grad():
                projection.weight.copy_(tensors[f"{case['id']}.projection.weight"])
                projection.bias.copy_(tensors[f"{case['id']}.projection.bias"])
        elif f"{case['id']}.projection.weight" in tensors:
            raise SystemExit(f"{case['id']}: the C++ task has a projection, timm's has none")
    task.train()
    assert not task.teacher.training and student.training

    result = task(x, target)
    result["loss"].backward()

    out = {k: result[k].detach().clone().reshape(()) for k in ("loss", "task_loss", "kd_loss")}
    out["output"] = result["output"].detach().clone()
    for name, p in named.items():
        if p.grad is None:
            raise SystemExit(f"{case['id']}: {name} got no gradient")
        out["grad." + name] = p.grad.detach().clone()
    for name, p in teacher.named_parameters():
        if p.grad is not None:
            raise SystemExit(f"{case['id']}: teacher parameter {name} got a gradient")
    save_file(out, f"{directory}/{case['id']}.out.safetensors")
    print(f"{case['id']}: loss {out['loss'].item():.6g} task_loss {out['task_loss'].item():.6g} "
          f"kd_loss {out['kd_loss'].item():.6g} weights (task {task.task_loss_weight}, "
          f"distill {task.distill_loss_weight})")


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    directory = argv[0]
    torch.set_num_threads(1)
    path = f"{directory}/in.safetensors"
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        cases = json.loads(f.metadata()["cases"])
    for case in cases:
        run_case(tensors, case, directory)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
