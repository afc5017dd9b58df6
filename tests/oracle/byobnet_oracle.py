"""Python oracle for test_byobnet: timm's ByobNet models (RepVGG, GERNet, MobileViT,
MobileOne, RegNetZ, the ResNet-like ts / q models) as the reference.

Modes and files as tests/oracle/model_parity.py describes. The shared
perturbation draws every BatchNorm weight, so the last BN of each residual
block that timm's zero_init_last sets to zero is non-zero in the comparisons.
timm's RepVGG and MobileOne pretrained_cfgs name two first convs
(stem.conv_kxk.conv, stem.conv_1x1.conv; stem.conv_kxk.0.conv,
stem.conv_scale.conv); the C++ PretrainedCfg holds one, the first, so the
oracle reports that one. The *_evos RegNetZs' EvoNorm2dS0a layers also get
their v (ones at init) drawn, as the shared perturbation draws norm weights,
so that their x * sigmoid(x * v) activation is compared away from v = 1.
"""
import sys

import torch
import timm
from timm.layers import DropPath
from timm.layers.evo_norm import EvoNorm2dS0a

import model_parity

_create_model = timm.create_model


def _create_model_first_conv(*args, **kwargs):
    model = _create_model(*args, **kwargs)
    cfg = getattr(model, "pretrained_cfg", None)
    if cfg is not None and isinstance(cfg.get("first_conv"), (list, tuple)):
        model.pretrained_cfg = dict(cfg, first_conv=cfg["first_conv"][0])
    return model


timm.create_model = _create_model_first_conv

_perturb = model_parity.perturb


def _perturb_with_evonorm_v(model, generator):
    _perturb(model, generator)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, EvoNorm2dS0a) and m.v is not None:
                m.v.copy_(torch.rand(m.v.shape, generator=generator) * 0.5 + 0.75)


model_parity.perturb = _perturb_with_evonorm_v

_save_file = model_parity.save_file


def _save_file_contiguous(tensors, filename, metadata=None):
    # The attention-pool head's logits are its first token, x[:, 0], a
    # non-contiguous view that safetensors refuses.
    _save_file({k: v.contiguous() for k, v in tensors.items()}, filename, metadata=metadata)


model_parity.save_file = _save_file_contiguous


def grad_keys(model):
    # The stem, the first stage, the last stage's first block, final_conv and
    # the head: every module kind without writing every gradient of a large model.
    last_stage = len(model.stages) - 1
    prefixes = ("stem.", "stages.0.", f"stages.{last_stage}.0.", "final_conv.", "head.")
    return [name for name, _ in model.named_parameters() if name.startswith(prefixes)]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(getattr(block, "drop_path", None), DropPath) else 0.0
            for stage in model.stages for block in stage]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
