"""Python oracle for test_ghostnet: timm's GhostNet, GhostNetV2 and GhostNetV3 as the reference
(GhostNetV3 built in training form; with a case's "reparam", timm's reparameterize_model of it as well).

Modes and files as tests/oracle/model_parity.py describes, but for two things:
timm's GhostNet takes no drop_path_rate (its constructor raises a TypeError),
so the drop_path_rate=0.2 the shared oracle passes to record per-block rates
is left out here (the rates are the empty list); and timm's GhostNet defaults
to drop_rate 0.2 where train.py passes --drop (0 unless set) and the C++
models take ModelArgs.drop_rate (0 unless set), so models are created here
with drop_rate 0 unless a case sets it, as train.py creates them.
"""
import sys

import timm

import model_parity

_create_model = timm.create_model


def create_model(*args, drop_path_rate=None, **kwargs):
    kwargs.setdefault("drop_rate", 0.0)
    return _create_model(*args, **kwargs)


def grad_keys(model):
    # The stem, the first stage, the first strided SE block (projection
    # shortcut; the DFC branch from v2 on), the final conv stage and the head.
    last = len(model.blocks) - 1
    prefixes = ("conv_stem.", "bn1.", "blocks.0.", "blocks.3.0.", f"blocks.{last}.", "conv_head.", "classifier.")
    return [name for name, _ in model.named_parameters() if name.startswith(prefixes)]


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
