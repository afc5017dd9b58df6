"""Python oracle for test_convnext: timm's ConvNeXt as the reference.

Modes and files as tests/oracle/model_parity.py describes.
"""
import sys

from timm.layers import DropPath

import model_parity


def grad_keys(model):
    prefixes = [f"stages.{i}.blocks." for i in range(len(model.stages))]
    return model_parity.selected_grad_keys(model, prefixes)


def drop_path_rates(model):
    return [blk.drop_path.drop_prob if isinstance(blk.drop_path, DropPath) else 0.0
            for stage in model.stages for blk in stage.blocks]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
