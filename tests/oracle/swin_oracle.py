"""Python oracle for test_swin: timm's SwinTransformer as the reference.

Modes and files as tests/oracle/model_parity.py describes.
"""
import sys

from timm.layers import DropPath

import model_parity


def grad_keys(model):
    prefixes = [f"layers.{i}.blocks." for i in range(len(model.layers))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    return [blk.drop_path1.drop_prob if isinstance(blk.drop_path1, DropPath) else 0.0
            for stage in model.layers for blk in stage.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
