"""Python oracle for test_naflex_data: the pieces of timm's NaFlex input pipeline.

OUT.safetensors SIZES_JSON
    SIZES_JSON: a list of [image_h, image_w, patch, max_seq_len, max_ratio or null]. Writes
    "seq.sizes" (K, 2) int64 and "seq.ratios" (K,) float64: timm's get_image_size_for_seq for
    each (divisible_by_patch=True; -1 where it raises ValueError). And for six random uint8
    images of sizes IMAGE_SIZES (five RGB, one L; most no multiple of 16): "img<i>" (H, W, C),
    timm's Patchify(16) of the image as a (C, H, W) uint8 tensor ("patches<i>", "coord<i>"),
    NaFlexCollator(SEQ_LEN) over the RGB ones ("batch.patches" float32, "batch.coord",
    "batch.valid") and NaFlexPrefetchLoader's normalisation of those patches with ImageNet's
    mean and std ("batch.normalized"); the same RGB images through the channels-first
    pipeline (Patchify(16, channels_last=False), the collator, the loader's channels-first
    normalisation): "batch.normalized_cf", each patch (C, Ph, Pw) flat.

CPU, one thread.
"""
import json
import sys

import torch
from safetensors.torch import save_file
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.data.naflex_dataset import NaFlexCollator
from timm.data.naflex_transforms import Patchify, get_image_size_for_seq

IMAGE_SIZES = [(32, 48, 3), (37, 50, 3), (16, 16, 3), (5, 70, 3), (64, 64, 3), (20, 33, 1)]
SEQ_LEN = 12


def main():
    torch.set_num_threads(1)
    out_path, cases = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    sizes, ratios = [], []
    for h, w, patch, max_seq_len, max_ratio in cases:
        try:
            ratio, hw = get_image_size_for_seq((h, w), patch, max_seq_len, max_ratio=max_ratio)
        except ValueError:
            ratio, hw = -1.0, (-1, -1)
        sizes.append(list(hw))
        ratios.append(ratio)
    out["seq.sizes"] = torch.tensor(sizes, dtype=torch.int64)
    out["seq.ratios"] = torch.tensor(ratios, dtype=torch.float64)

    generator = torch.Generator().manual_seed(0)
    patchify = Patchify(16)
    patchify_cf = Patchify(16, channels_last=False)
    samples, samples_cf = [], []
    for i, (h, w, c) in enumerate(IMAGE_SIZES):
        img = torch.randint(0, 256, (h, w, c), generator=generator, dtype=torch.uint8)
        d = patchify(img.permute(2, 0, 1).contiguous())
        out[f"img{i}"] = img
        out[f"patches{i}"] = d["patches"].contiguous()
        out[f"coord{i}"] = d["patch_coord"].contiguous()
        if c == 3:
            samples.append((d, 0))
            samples_cf.append((patchify_cf(img.permute(2, 0, 1).contiguous()), 0))
    batch, _ = NaFlexCollator(SEQ_LEN)(samples)
    out["batch.patches"] = batch["patches"]
    out["batch.coord"] = batch["patch_coord"]
    out["batch.valid"] = batch["patch_valid"]
    mean = torch.tensor([x * 255 for x in IMAGENET_DEFAULT_MEAN], dtype=torch.float32).view(1, 1, 3)
    std = torch.tensor([x * 255 for x in IMAGENET_DEFAULT_STD], dtype=torch.float32).view(1, 1, 3)
    b, n, _ = batch["patches"].shape
    out["batch.normalized"] = batch["patches"].view(b, n, -1, 3).sub(mean).div(std).view(b, n, -1)
    batch_cf, _ = NaFlexCollator(SEQ_LEN)(samples_cf)
    mean_cf, std_cf = mean.view(1, 3, 1), std.view(1, 3, 1)
    out["batch.normalized_cf"] = batch_cf["patches"].view(b, n, 3, -1).sub(mean_cf).div(std_cf).view(b, n, -1)
    save_file(out, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
