"""Python oracle for test_maxxvit: timm's MaxxVit (the maxvit_*, coatnet_*,
maxxvit_* / maxxvitv2_* and coatnext_* models of timm/models/maxxvit.py) as
the reference.

Modes and files as tests/oracle/model_parity.py describes; cases shrink the
models through timm's img_size kwarg (the MaxViT window and grid are
img_size // 32, the CoAtNet attention covers each stage's map). The shared
perturbation draws the layer-scale "gamma" factors, norm affines, biases and
BatchNorm statistics; the relative position tables keep their random init.
The train step runs the RelPosMlp dropout (p 0.125) as timm does: the C++
side draws the same masks from the same seed.
"""
import sys

import torch
from timm.layers import DropPath

import model_parity


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    # Per block, the rate of its first DropPath (the conv block's in a MaxViT block; 0 without one).
    rates = []
    for stage in model.stages:
        for blk in stage.blocks:
            rate = 0.0
            for m in blk.modules():
                if isinstance(m, DropPath):
                    rate = m.drop_prob
                    break
            rates.append(rate)
    return rates


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
