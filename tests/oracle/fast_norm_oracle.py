"""Python oracle for test_fast_norm: timm's fast norm (layers/fast_norm.py, --fast-norm).

OUT.safetensors
    For each of timm's fast-capable norm layers (LayerNorm, LayerNorm2d, GroupNorm,
    GroupNorm1, RmsNorm, RmsNorm2d, SimpleNorm, SimpleNorm2d) with random affine
    parameters, writes "<case>.x" (a float32 input), "<case>.weight" / "<case>.bias"
    (those it has), and its outputs under torch.autocast('cpu', bfloat16): built with
    set_fast_norm(True) ("<case>.fast", bfloat16) and without ("<case>.plain", float32),
    and the fast layer's output outside autocast ("<case>.fast_fp32").
--modules NAME,NAME,...
    Prints one JSON object: for each model name, timm.create_model(name) built on the
    meta device after set_fast_norm(True), the qualified names of its modules whose
    _fast_norm is set (the layers --fast-norm reaches), sorted.

CPU, one thread.
"""
import json
import sys

import torch
import timm
from safetensors.torch import save_file
from timm.layers import GroupNorm, GroupNorm1, LayerNorm, LayerNorm2d, RmsNorm, RmsNorm2d, SimpleNorm, SimpleNorm2d
from timm.layers import set_fast_norm

CHANNELS = 8

# name -> (constructor, input shape)
CASES = {
    "layer_norm": (lambda: LayerNorm(CHANNELS, eps=1e-5), (2, 5, CHANNELS)),
    "layer_norm2d": (lambda: LayerNorm2d(CHANNELS), (2, CHANNELS, 3, 4)),
    "group_norm": (lambda: GroupNorm(CHANNELS, num_groups=4), (2, CHANNELS, 3, 4)),
    "group_norm1": (lambda: GroupNorm1(CHANNELS), (2, CHANNELS, 3, 4)),
    "rms_norm": (lambda: RmsNorm(CHANNELS), (2, 5, CHANNELS)),
    "rms_norm2d": (lambda: RmsNorm2d(CHANNELS), (2, CHANNELS, 3, 4)),
    "simple_norm": (lambda: SimpleNorm(CHANNELS), (2, 5, CHANNELS)),
    "simple_norm2d": (lambda: SimpleNorm2d(CHANNELS), (2, CHANNELS, 3, 4)),
}


def build(make, fast, state):
    set_fast_norm(fast)
    try:
        layer = make()
    finally:
        set_fast_norm(False)
    assert layer._fast_norm == fast
    layer.load_state_dict(state)
    return layer


def write_layers(out_path):
    generator = torch.Generator().manual_seed(0)
    out = {}
    for name, (make, shape) in CASES.items():
        state = {k: torch.randn(v.shape, generator=generator) * 0.3 + (1.0 if k == "weight" else 0.0)
                 for k, v in make().state_dict().items()}
        x = torch.randn(shape, generator=generator) * 2 + 0.5
        fast, plain = build(make, True, state), build(make, False, state)
        with torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out[f"{name}.fast"] = fast(x)
                out[f"{name}.plain"] = plain(x)
            out[f"{name}.fast_fp32"] = fast(x)
        out[f"{name}.x"] = x
        for key, value in state.items():
            out[f"{name}.{key}"] = value
    save_file({k: v.contiguous() for k, v in out.items()}, out_path)


def fast_modules(names):
    set_fast_norm(True)
    result = {}
    for name in names:
        with torch.device("meta"):
            model = timm.create_model(name)
        result[name] = sorted(n for n, m in model.named_modules() if getattr(m, "_fast_norm", False))
    print(json.dumps(result))


def main(argv):
    torch.set_num_threads(1)
    if len(argv) == 2 and argv[0] == "--modules":
        fast_modules(argv[1].split(","))
    elif len(argv) == 1:
        write_layers(argv[0])
    else:
        sys.exit("usage: fast_norm_oracle.py OUT.safetensors | --modules NAME,NAME,...")


if __name__ == "__main__":
    main(sys.argv[1:])
