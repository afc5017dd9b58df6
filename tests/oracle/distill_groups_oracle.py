"""Oracle for tests/core/test_distillation.cpp: the optimizer's parameter
groups of timm's FeatureDistillationTask (create_optimizer_v2 over
task.get_trainable_module(), the student and its feature projection).

  distill_groups_oracle.py STUDENT TEACHER WEIGHT_DECAY LAYER_DECAY
      LAYER_DECAY "none": the weight-decay groups. Prints a JSON list, one
      entry per group in order: {"names": [parameter names in order],
      "weight_decay", "lr_scale"}.
"""
import json
import sys

import timm
from timm.optim import create_optimizer_v2
from timm.task import FeatureDistillationTask


def main(argv):
    student_name, teacher_name, weight_decay, layer_decay = argv
    student = timm.create_model(student_name, num_classes=10)
    teacher = timm.create_model(teacher_name, num_classes=10)
    task = FeatureDistillationTask(student_model=student, teacher_model=teacher, verbose=False)
    trainable = task.get_trainable_module()
    kwargs = {} if layer_decay == "none" else {"layer_decay": float(layer_decay)}
    optimizer = create_optimizer_v2(trainable, opt="sgd", lr=0.1, weight_decay=float(weight_decay), **kwargs)
    names = {id(p): n for n, p in trainable.named_parameters()}
    groups = [{"names": [names[id(p)] for p in g["params"]], "weight_decay": g["weight_decay"],
               "lr_scale": g.get("lr_scale", 1.0)} for g in optimizer.param_groups]
    print(json.dumps(groups))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
