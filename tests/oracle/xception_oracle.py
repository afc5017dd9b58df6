"""Python oracle for test_xception: timm's Aligned Xceptions (xception_aligned.py:
xception41 / 65 / 71, xception41p / 65p) and the original Xception (xception.py:
legacy_xception) as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for one thing:
timm's legacy Xception takes no drop_path_rate (its constructor raises a
TypeError), so for legacy_xception the drop_path_rate=0.2 the shared oracle
passes to record per-block rates is left out; it has no drop path and its
rates are the empty list.
"""
import sys

import timm
from timm.layers import DropPath

import model_parity

_create_model = timm.create_model


def create_model_legacy_without_drop_path(name, *args, drop_path_rate=None, **kwargs):
    if drop_path_rate is not None and not name.startswith("legacy_xception"):
        kwargs["drop_path_rate"] = drop_path_rate
    return _create_model(name, *args, **kwargs)


def grad_keys(model):
    # Aligned: the stem, blocks 0, 1 and 3, the last two blocks (the strided
    # exit block and the one without skip) and the head: every block kind
    # (strided with a shortcut, stride 1 with a channel change in xception71,
    # identity skip, no skip). Legacy: all but block3 and block5..11.
    if hasattr(model, "blocks"):
        n = len(model.blocks)
        keep = {0, 1, 3, n - 2, n - 1}
        keys = []
        for name, _ in model.named_parameters():
            if name.startswith("blocks."):
                if int(name.split(".")[1]) not in keep:
                    continue
            keys.append(name)
        return keys
    skip = tuple(f"block{i}." for i in (3, 5, 6, 7, 8, 9, 10, 11))
    return [name for name, _ in model.named_parameters() if not name.startswith(skip)]


def drop_path_rates(model):
    if not hasattr(model, "blocks"):
        return []
    return [block.drop_path.drop_prob if isinstance(block.drop_path, DropPath) else 0.0 for block in model.blocks]


if __name__ == "__main__":
    timm.create_model = create_model_legacy_without_drop_path
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
