"""Oracle for tests/core/test_distillation.cpp: timm's LogitDistillationTask
and FeatureDistillationTask (timm/task/distillation.py) and
TokenDistillationTask (timm/task/token_distillation.py), one training step.

  distill_oracle.py DIR
      Reads DIR/in.safetensors, which the C++ test writes:
        "input" (N, C, H, W) and "target" (N,): the batch (a case may name
            another pair, e.g. a 224x224 one for a ViT student);
        "<model>.<key>": the state_dict of each model a case names (the
            student, e.g. "resnet18.conv1.weight", and the teachers);
        "<id>.projection.weight" / "<id>.projection.bias": the feature
            projection of a case that has one (the C++ task's own init);
        metadata "cases": a JSON list of
            {"id", "task": "logit" | "feature" | "token", "student", "teacher",
             "input", "target" (optional: the batch's tensor names, default
             "input" and "target"),
             "drop_rate", "drop_path_rate" (optional, null or absent: not
             passed to create_model, the model's default),
             "distill_type" (token tasks: "soft" | "hard"),
             "num_classes", "smoothing" (0: nn.CrossEntropyLoss, else
             timm.loss.LabelSmoothingCrossEntropy(smoothing)),
             "temperature" (logit and token tasks), "distill_loss_weight",
             "task_loss_weight" (null: not given),
             "student_mean", "student_std", "teacher_mean", "teacher_std"}.
      For each case builds the student and the teacher with
      timm.create_model(name, num_classes, in_chans), loads their weights,
      sets each model's pretrained_cfg mean / std to the case's (the task
      reads the student's, DistillationTeacher the teacher's), builds the task
      with teacher_model=<the teacher module>, copies the projection weights,
      calls task.train(), result = task(input, target),
      result['loss'].backward(), and writes DIR/<id>.out.safetensors:
        "loss", "task_loss", "kd_loss" (0-d; "distill_loss" for token tasks,
        timm's name), "output" (the student's logits; a token task's: the
        class head's),
        "grad.student.<name>" for every student parameter and
        "grad.projection.weight" / "grad.projection.bias" when the task has a
        projection. Every trainable parameter must have a gradient (exits 1
        otherwise); the teacher's must have none. A token task's student must
        have no active dropout or drop path (train mode must be
        deterministic, exits 1 otherwise); a hard token case's teacher must
        rank its top two logits at least 1e-3 apart (exits 1 otherwise).

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
from timm.layers import DropPath
from timm.task import FeatureDistillationTask, LogitDistillationTask, TokenDistillationTask


def prefixed(tensors, prefix):
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def build_model(tensors, name, num_classes, in_chans, mean, std, case):
    kwargs = {k: case[k] for k in ("drop_rate", "drop_path_rate") if case.get(k) is not None}
    model = timm.create_model(name, num_classes=num_classes, in_chans=in_chans, **kwargs)
    model.load_state_dict(prefixed(tensors, name + "."), strict=True)
    # The tasks read the normalisation from pretrained_cfg (the student's in
    # the task, the teacher's in DistillationTeacher).
    model.pretrained_cfg = dict(model.pretrained_cfg, mean=tuple(mean), std=tuple(std))
    return model


def run_case(tensors, case, directory):
    x, target = tensors[case.get("input", "input")], tensors[case.get("target", "target")]
    in_chans = x.shape[1]
    student = build_model(tensors, case["student"], case["num_classes"], in_chans, case["student_mean"],
                          case["student_std"], case)
    teacher = build_model(tensors, case["teacher"], case["num_classes"], in_chans, case["teacher_mean"],
                          case["teacher_std"], case)
    smoothing = case["smoothing"]
    criterion = LabelSmoothingCrossEntropy(smoothing) if smoothing > 0 else nn.CrossEntropyLoss()
    common = dict(student_model=student, teacher_model=teacher, criterion=criterion,
                  distill_loss_weight=case["distill_loss_weight"], task_loss_weight=case["task_loss_weight"],
                  device=torch.device("cpu"), verbose=False)
    distill_part = "kd_loss"
    if case["task"] == "logit":
        task = LogitDistillationTask(temperature=case["temperature"], **common)
        named = {"student." + k: p for k, p in student.named_parameters()}
    elif case["task"] == "token":
        # Calls student.set_distilled_training(True): in train mode the
        # student returns (class head, distillation head) logits.
        task = TokenDistillationTask(distill_type=case["distill_type"], temperature=case["temperature"], **common)
        named = {"student." + k: p for k, p in student.named_parameters()}
        distill_part = "distill_loss"
        for name, m in student.named_modules():
            if (isinstance(m, nn.Dropout) and m.p > 0) or isinstance(m, DropPath):
                raise SystemExit(f"{case['id']}: the student's {name} ({m}) makes train mode random")
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
    if case["task"] == "token" and case["distill_type"] == "hard":
        # The argmax must not hang on float32 rounding (ours may round otherwise).
        with torch.no_grad():
            top2 = task.teacher(task.teacher.normalize_input(x, task.student_mean, task.student_std)).topk(2).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()
        if margin < 1e-3:
            raise SystemExit(f"{case['id']}: the teacher's top two logits are {margin:.2g} apart; use another batch")
    result["loss"].backward()

    out = {k: result[k].detach().clone().reshape(()) for k in ("loss", "task_loss", distill_part)}
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
          f"{distill_part} {out[distill_part].item():.6g} weights (task {task.task_loss_weight}, "
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
