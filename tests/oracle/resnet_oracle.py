"""Python oracle for test_resnet: timm's ResNets as the reference.

Modes and files as tests/oracle/model_parity.py describes.
"""
import sys

import torch
from timm.layers import DropPath, EcaModule

import model_parity

GRAD_KEYS_BY_BLOCK = {"BasicBlock": "bn2", "Bottleneck": "bn3"}


def grad_keys(model):
    # The stem (plain or deep), the stem pool's conv (ResNet-RS), the first
    # conv, the last block's last norm (BatchNorm or GroupNorm), its SE or
    # ECA, the avg-down norm and the head.
    last_block = model.layer4[-1]
    last = f"layer4.{len(model.layer4) - 1}"
    last_bn = GRAD_KEYS_BY_BLOCK[type(last_block).__name__]
    stem_conv = "conv1.0.weight" if isinstance(model.conv1, torch.nn.Sequential) else "conv1.weight"
    keys = [stem_conv, "bn1.weight"]
    # The ResNet-RS's stem-pool conv (the blur models' stem pool, a max-pool
    # and a BlurPool2d, has no parameters).
    if isinstance(model.maxpool, torch.nn.Sequential) and isinstance(model.maxpool[0], torch.nn.Conv2d):
        keys += ["maxpool.0.weight", "maxpool.1.weight"]
    keys += ["layer1.0.conv1.weight", f"{last}.{last_bn}.weight"]
    if isinstance(last_block.se, EcaModule):
        keys.append(f"{last}.se.conv.weight")
    elif last_block.se is not None:
        keys += [f"{last}.se.fc1.weight", f"{last}.se.fc2.bias"]
    if isinstance(model.layer2[0].downsample[0], torch.nn.AvgPool2d):
        keys.append("layer2.0.downsample.1.weight")
    return keys + ["fc.weight", "fc.bias"]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0
            for stage in (model.layer1, model.layer2, model.layer3, model.layer4) for block in stage]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
