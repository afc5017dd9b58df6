"""Python oracle for test_swin: timm's SwinTransformer and SwinTransformerV2 as the reference.

Modes and files as tests/oracle/model_parity.py describes. SwinV2's attention
parameters that model_parity's perturb leaves at their init are perturbed too
(perturb below).
"""
import sys

import torch
from timm.layers import DropPath

import model_parity

_shared_perturb = model_parity.perturb


def perturb(model, generator):
    # SwinV2's q_bias / v_bias start at zero and its logit_scale at log(10)
    # everywhere, which model_parity.perturb does not touch (their names are
    # not "bias" / "weight"); random values exercise them. logit_scale stays
    # in [0.5, 3], under timm's cap of log(100): temperatures near 100 make
    # float32 gradients differ from float64 ones by more than the tests'
    # 1e-4 (test_swin checks the cap on its own). v1 has neither parameter:
    # its draws are unchanged.
    _shared_perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("q_bias", "v_bias"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
            elif leaf == "logit_scale":
                p.copy_(torch.rand(p.shape, generator=generator) * 2.5 + 0.5)


model_parity.perturb = perturb


def grad_keys(model):
    prefixes = [f"layers.{i}.blocks." for i in range(len(model.layers))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0
            for stage in model.layers for blk in stage.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
