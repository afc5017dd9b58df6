"""Python oracle for test_densenet: timm's DenseNets as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for one thing:
timm's DenseNet takes no drop_path_rate (its constructor raises a TypeError),
so the drop_path_rate=0.2 the shared oracle passes to record per-block rates
is left out here; DenseNet has no drop path and its rates are the empty list.
"""
import re
import sys

import timm

import model_parity

_create_model = timm.create_model


def create_model_without_drop_path(*args, drop_path_rate=None, **kwargs):
    return _create_model(*args, **kwargs)


_DENSE_LAYER = re.compile(r"features\.denseblock(\d+)\.denselayer(\d+)\.")


def grad_keys(model):
    # Every parameter outside the dense blocks (stem, transitions, norm5,
    # classifier) and those of the first and last dense layer of each block.
    keys = []
    for name, _ in model.named_parameters():
        m = _DENSE_LAYER.match(name)
        if m is None:
            keys.append(name)
            continue
        block = model.features.get_submodule(f"denseblock{m.group(1)}")
        if int(m.group(2)) in (1, len(block)):
            keys.append(name)
    return keys


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model_without_drop_path
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
