"""Python oracle for test_efficientnet: timm's EfficientNet / MobileNetV2 / MobileNetV3 / MobileNetV4 as the reference.

Modes and files as tests/oracle/model_parity.py describes.
"""
import sys

from timm.layers import DropPath

import model_parity


def grad_keys(model):
    # Every parameter of the stem, bn1, the first and the last block and the head.
    last_stage = len(model.blocks) - 1
    last = f"blocks.{last_stage}.{len(model.blocks[last_stage]) - 1}."
    prefixes = ("conv_stem.", "bn1.", "blocks.0.0.", last, "conv_head.", "bn2.", "norm_head.", "classifier.")
    return [k for k, _ in model.named_parameters() if k.startswith(prefixes)]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0
            for stage in model.blocks for block in stage]


if __name__ == "__main__":
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
