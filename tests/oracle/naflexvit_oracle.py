"""Python oracle for test_naflexvit (image input): timm's NaFlexVit as the reference.

Modes and files as tests/oracle/model_parity.py describes; the NaFlex patch input
has its own oracle, naflex_patches_oracle.py.
"""
import sys

from timm.layers import DropPath

import model_parity


def grad_keys(model):
    return model_parity.selected_grad_keys(model, ["blocks."])


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0 for blk in model.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
