"""Python oracle for test_fastvit: timm's FastViT models (fastvit_t8 .. ma36,
built in training form; with a case's "reparam", timm's reparameterize_model of
it as well) as the reference.

Modes and files as tests/oracle/model_parity.py describes; the shared
perturbation already draws the LayerScale2d "gamma" factors in [0, 0.5) and
the BatchNorm statistics, so every branch of the MobileOne blocks counts.
timm's first_conv is a pair ('stem.0.conv_kxk.0.conv', 'stem.0.conv_scale.conv');
the C++ cfg holds one string, so "info" answers with the first.
"""
import sys

import timm
from timm.layers import DropPath

import model_parity


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    rates = []
    for stage in model.stages:
        for blk in stage.blocks:
            dp = blk.drop_path if hasattr(blk, "drop_path") else blk.drop_path1
            rates.append(dp.drop_prob if isinstance(dp, DropPath) else 0.0)
    return rates


_create_model = timm.create_model


def create_model(*args, **kwargs):
    model = _create_model(*args, **kwargs)
    first_conv = model.pretrained_cfg.get("first_conv")
    if isinstance(first_conv, (tuple, list)):
        model.pretrained_cfg = dict(model.pretrained_cfg, first_conv=first_conv[0])
    return model


if __name__ == "__main__":
    timm.create_model = create_model
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
