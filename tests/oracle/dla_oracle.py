"""Python oracle for test_dla: timm's DLAs as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for one thing:
timm's DLA takes no drop_path_rate (its constructor raises a TypeError), so
the drop_path_rate=0.2 the shared oracle passes to record per-block rates is
left out here; DLA has no drop path and its rates are the empty list.
"""
import sys

import timm

import model_parity

_create_model = timm.create_model


def create_model_without_drop_path(*args, drop_path_rate=None, **kwargs):
    return _create_model(*args, **kwargs)


def grad_keys(model):
    # Every parameter of the stem, level0..2, the head, and every root and
    # project; elsewhere those under 65536 values (every BN, the narrower
    # convs), enough to cover each parameter kind without writing every
    # gradient of a wide model.
    keys = []
    for name, p in model.named_parameters():
        if (name.startswith(("base_layer.", "level0.", "level1.", "level2.", "fc."))
                or ".root." in name or ".project." in name or p.numel() < 65536):
            keys.append(name)
    return keys


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model_without_drop_path
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
