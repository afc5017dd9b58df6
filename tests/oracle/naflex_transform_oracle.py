"""Python oracle for test_basic's NaFlex crops: timm's create_transform(naflex=True).

OUT.safetensors CASES_JSON
    CASES_JSON: a list of {"h", "w", "patch", "max_seq_len", "interpolation", "is_training",
    "no_aug"}. For each case i, a random RGB image of h x w ("in<i>", uint8 (H, W, C)), the
    repr of timm's create_transform(naflex=True, patch_size, max_seq_len, interpolation,
    use_prefetcher=True, is_training, no_aug) ("repr<i>", its UTF-8 bytes as uint8) and,
    for eval and no_aug (deterministic), its output on the PIL image ("out<i>", uint8
    (C, H, W), MaybePILToTensor's).

CPU, one thread.
"""
import json
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from timm.data import create_transform


def main():
    torch.set_num_threads(1)
    out_path, cases = sys.argv[1], json.loads(sys.argv[2])
    rng = np.random.default_rng(0)
    out = {}
    for i, c in enumerate(cases):
        img = rng.integers(0, 256, (c["h"], c["w"], 3), dtype=np.uint8)
        t = create_transform(
            224, is_training=c["is_training"], no_aug=c["no_aug"], naflex=True, patch_size=c["patch"],
            max_seq_len=c["max_seq_len"], interpolation=c["interpolation"], use_prefetcher=True)
        out[f"in{i}"] = torch.from_numpy(img.copy())
        out[f"repr{i}"] = torch.tensor(list(repr(t).encode()), dtype=torch.uint8)
        if not c["is_training"] or c["no_aug"]:
            out[f"out{i}"] = t(Image.fromarray(img)).contiguous()
    save_file(out, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
