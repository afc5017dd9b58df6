"""Python oracle for test_metaformer: timm's MetaFormer models (PoolFormer v1
and v2, ConvFormer, CAFormer) as the reference.

Modes and files as tests/oracle/model_parity.py describes, with two
additions for these models:
- the shared perturbation leaves every "scale" parameter at its init, so
  PoolFormer v1's layer scale (1e-5 / 1e-6) would hide its token mixers and
  Mlps from the comparison: here layer scales are also drawn in [0, 0.5) and
  res scales and StarReLU scales in [0.75, 1.25);
- timm's MetaFormer has no group_matcher (the shared "info" mode calls it):
  here it answers with no groups, which is what ours returns.
"""
import sys

import torch
from timm.layers import DropPath
from timm.models.metaformer import MetaFormer

import model_parity


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0
            for stage in model.stages for blk in stage.blocks]


_shared_perturb = model_parity.perturb


def perturb(model, generator):
    _shared_perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] != "scale":
                continue
            if ".layer_scale" in name:
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5)
            else:
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5 + 0.75)


def no_groups(self, coarse=False):
    return {}


if __name__ == "__main__":
    model_parity.perturb = perturb
    MetaFormer.group_matcher = no_groups
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
