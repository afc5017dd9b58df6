"""Python oracle for test_regnet: timm's RegNets as the reference.

Modes and files as tests/oracle/model_parity.py describes.
"""
import sys

import torch
from timm.layers import DropPath

import model_parity


def grad_keys(model):
    # The stem, the first block's convs (and SE), the last block's and the head.
    last = f"s4.b{len(list(model.s4.children()))}"
    keys = ["stem.conv.weight", "stem.bn.weight", "s1.b1.conv1.conv.weight", "s1.b1.downsample.conv.weight",
            f"{last}.conv2.conv.weight", f"{last}.conv3.bn.weight"]
    if not isinstance(model.s1.b1.se, torch.nn.Identity):
        keys += ["s1.b1.se.fc1.weight", f"{last}.se.fc2.bias"]
    return keys + ["head.fc.weight", "head.fc.bias"]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0
            for stage in (model.s1, model.s2, model.s3, model.s4) for block in stage.children()]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
