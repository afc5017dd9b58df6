"""Python oracle for test_vgg: timm's VGGs as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for one thing:
timm's VGG takes no drop_path_rate (its constructor raises a TypeError), so
the drop_path_rate=0.2 the shared oracle passes to record per-block rates is
left out here; VGG has no blocks and its rates are the empty list.
"""
import sys

import timm
import torch

import model_parity

_create_model = timm.create_model


def create_model_without_drop_path(*args, drop_path_rate=None, **kwargs):
    return _create_model(*args, **kwargs)


def grad_keys(model):
    # The first conv (and its BN), the last conv, ConvMlp's biases (its
    # weights are 100M / 17M values) and the head.
    convs = [name for name, m in model.features.named_children() if isinstance(m, torch.nn.Conv2d)]
    keys = [f"features.{convs[0]}.weight", f"features.{convs[0]}.bias"]
    if model.use_norm:
        keys += ["features.1.weight", "features.1.bias"]
    keys += [f"features.{convs[-1]}.weight", f"features.{convs[-1]}.bias"]
    return keys + ["pre_logits.fc1.bias", "pre_logits.fc2.bias", "head.fc.weight", "head.fc.bias"]


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model_without_drop_path
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
