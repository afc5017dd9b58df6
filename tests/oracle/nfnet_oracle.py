"""Python oracle for test_nfnet: timm's NormFreeNets (NFNet, NF-RegNet, NF-ResNet) as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for one
thing: timm's init leaves each ScaledStdConv2d gain at one (zero on every
block's conv3 unless skipinit) and every skipinit_gain at zero, so most
residual branches would start as zero and hide the blocks from the
comparison; the perturbation here also draws the gains (uniform in
[0.75, 1.25)) and skipinit gains (uniform in [0.25, 0.75)).
"""
import sys

import torch
from timm.layers import DropPath

import model_parity

_perturb = model_parity.perturb


def perturb_gains(model, generator):
    _perturb(model, generator)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "gain":
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5 + 0.75)
            elif leaf == "skipinit_gain":
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5 + 0.25)


def grad_keys(model):
    # The stem, the first block of the first stage, the last block of the last
    # stage, final_conv and the head: every parameter kind (gains, SE / ECA,
    # skipinit) without writing the gradients of a large model.
    last_stage = len(model.stages) - 1
    last_block = len(model.stages[last_stage]) - 1
    prefixes = ("stem.", "stages.0.0.", f"stages.{last_stage}.{last_block}.", "final_conv.", "head.")
    return [name for name, _ in model.named_parameters() if name.startswith(prefixes)]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0
            for stage in model.stages for block in stage]


if __name__ == "__main__":
    model_parity.perturb = perturb_gains
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
