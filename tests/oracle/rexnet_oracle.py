"""Python oracle for test_rexnet: timm's ReXNets as the reference.

Modes and files as tests/oracle/model_parity.py describes. timm's RexNet
defaults to drop_rate 0.2 where train.py passes --drop (0 unless set) and the
C++ models take ModelArgs.drop_rate (0 unless set); models are created here
with drop_rate 0 unless a case sets it, as train.py creates them.
"""
import sys

import timm
from timm.layers import DropPath

import model_parity

_create_model = timm.create_model


def create_model(*args, **kwargs):
    kwargs.setdefault("drop_rate", 0.0)
    return _create_model(*args, **kwargs)


def grad_keys(model):
    # The stem, the first block (no expansion, no SE), the first SE block, the
    # last block, the final conv and the head.
    last = len(model.features) - 1
    prefixes = ("stem.", "features.0.", "features.3.", f"features.{last - 1}.", f"features.{last}.", "head.")
    return [name for name, _ in model.named_parameters() if name.startswith(prefixes)]


def drop_path_rates(model):
    return [block.drop_path.drop_prob if isinstance(getattr(block, "drop_path", None), DropPath) else 0.0
            for block in model.features]


if __name__ == "__main__":
    timm.create_model = create_model
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
