"""Python oracle for test_eva: timm's Eva (EVA, EVA-02, EVA-CLIP image towers and
the SBB ViTs with RoPE of timm/models/eva.py) as the reference.

Modes and files as tests/oracle/model_parity.py describes, with one addition:
the shared perturbation leaves EVA's LayerScale factors (gamma_1, gamma_2, at
init_values ~1e-5) and the attention's q_bias / v_bias (zeros) at timm's init,
which would hide the blocks' branches and those biases from the comparison;
here the factors are drawn in [0, 0.5) and the biases from N(0, 0.02^2). The
classifier's weight, which timm's head_init_scale shrinks by 1000 (logits of
~1e-2 would make the logit comparisons loose), is scaled back to std 0.02.
"""
import sys

import torch
from timm.layers import DropPath

import model_parity


def grad_keys(model):
    return model_parity.selected_grad_keys(model, ["blocks."])


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0 for blk in model.blocks]


_shared_perturb = model_parity.perturb


def perturb(model, generator):
    _shared_perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("gamma_1", "gamma_2"):
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5)
            elif leaf in ("q_bias", "v_bias"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
            elif name == "head.weight":
                p.mul_(1000.0)


if __name__ == "__main__":
    model_parity.perturb = perturb
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
