"""Python oracle for test_levit: timm's LeViT models (Levit / LevitDistilled,
linear and conv modes) as the reference.

Modes and files as tests/oracle/model_parity.py describes, with one addition:
the shared perturbation leaves attention_biases at timm's init (zeros), which
would hide the relative-position bias tables from the comparison; here they are
drawn from N(0, 0.5^2).
"""
import sys

import torch
from timm.layers import DropPath

import model_parity


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def _rate(module):
    return module.drop_prob if isinstance(module, DropPath) else 0.0


def drop_path_rates(model):
    """Per stage: its downsample's drop_path (stages 1 on), then each block's drop_path1."""
    rates = []
    for stage in model.stages:
        if hasattr(stage.downsample, "drop_path"):
            rates.append(_rate(stage.downsample.drop_path))
        rates += [_rate(blk.drop_path1) for blk in stage.blocks]
    return rates


_shared_perturb = model_parity.perturb


def perturb(model, generator):
    _shared_perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] == "attention_biases":
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)


if __name__ == "__main__":
    model_parity.perturb = perturb
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
