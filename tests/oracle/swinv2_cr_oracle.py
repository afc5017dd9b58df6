"""Python oracle for test_swinv2_cr: timm's SwinTransformerV2Cr (swinv2_cr_*) as the reference.

Modes and files as tests/oracle/model_parity.py describes. The attention's
logit_scale, which model_parity's perturb leaves at its init log(10) (its
name is not "bias" / "weight"), is drawn in [0.5, 3] here, under timm's cap
of log(100), as swin_oracle.py does for SwinV2.
"""
import sys

import torch
from timm.layers import DropPath

import model_parity

_shared_perturb = model_parity.perturb


def perturb(model, generator):
    _shared_perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] == "logit_scale":
                p.copy_(torch.rand(p.shape, generator=generator) * 2.5 + 0.5)


model_parity.perturb = perturb


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0
            for stage in model.stages for blk in stage.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
