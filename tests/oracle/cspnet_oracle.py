"""Python oracle for test_cspnet: timm's CspNet models (CSPResNet(X)t, CSPDarkNet,
DarkNet and the cs3* models) as the reference.

Modes and files as tests/oracle/model_parity.py describes. The shared
perturbation draws every BatchNorm weight, so the last BN of each block that
timm's zero_init_last sets to zero is non-zero in the comparisons.
"""
import sys

from timm.layers import DropPath

import model_parity


def grad_keys(model):
    # The stem, the whole first stage, the last stage's down / expansion /
    # transition convs and last block, and the head: every module kind (SE,
    # avg_down, cross-stage convs) without writing every gradient of a large model.
    last_stage = len(model.stages) - 1
    last_block = len(model.stages[last_stage].blocks) - 1
    prefixes = ("stem.", "stages.0.", f"stages.{last_stage}.blocks.{last_block}.", "head.")
    stage_convs = tuple(f"stages.{last_stage}.{name}" for name in ("conv_down", "conv_exp", "conv_transition"))
    return [name for name, _ in model.named_parameters() if name.startswith(prefixes + stage_convs)]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0
            for stage in model.stages for block in stage.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
