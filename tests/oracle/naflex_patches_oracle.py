"""Python oracle for test_naflexvit (NaFlex patch input): timm's NaFlexVit on patch dicts.

OUT.safetensors CASES_JSON
    CASES_JSON is a list of {"id", "name", "kwargs", "batch_patch" (optional: the batch's patch
    size when it is not the model's; the patches then go in as timm's variable patch size
    batches, (B, N, Ph, Pw, C), or (B, N, C, Ph, Pw) with kwargs patchify_channels_last
    false)}. For each case, timm.create_model(name,
    num_classes=10, **kwargs) with model_parity.perturb's random norms, biases, tokens and
    layer scales, fed a batch of images of different sizes as timm's NaFlex collator
    lays them out: each image cut into patches by timm's batch_patchify ((Ph, Pw, C) flat,
    (C, Ph, Pw) with kwargs patchify_channels_last false; row-major over its own grid), then all padded with zero patches, (0, 0) coordinates and
    patch_valid False to one length (longer than the longest image). Writes
    "<id>.model.<key>" (the state_dict), "<id>.patches", "<id>.patch_coord",
    "<id>.patch_valid", "<id>.target", "<id>.logits" (eval mode), "<id>.loss" (train mode,
    cross-entropy against target) and "<id>.grad.<key>" for every parameter.

CPU, float32, one thread.
"""
import json
import sys

import torch
import torch.nn.functional as F
import timm
from safetensors.torch import save_file
from timm.models.naflexvit import batch_patchify

import model_parity

# (height, width) of the batch's images: grids 2x3, 3x2, 4x4, 1x1 and 2x3 again
# (two samples sharing a grid), at patch size 16.
IMAGE_SIZES = [(32, 48), (48, 32), (64, 64), (16, 16), (32, 48)]
NUM_CLASSES = 10


def patch_batch(generator, patch_size, channels_last, in_chans=3):
    # Padded past the longest image: 20 at patch size 16.
    padded_len = max((h // patch_size) * (w // patch_size) for h, w in IMAGE_SIZES) + 4
    patches, coords, valid = [], [], []
    for h, w in IMAGE_SIZES:
        image = torch.randn(1, in_chans, h, w, generator=generator)
        p, (gh, gw) = batch_patchify(image, (patch_size, patch_size), channels_last=channels_last)
        n = gh * gw
        ys, xs = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
        coord = torch.stack([ys.reshape(-1), xs.reshape(-1)], dim=1)
        patches.append(F.pad(p[0], (0, 0, 0, padded_len - n)))
        coords.append(F.pad(coord, (0, 0, 0, padded_len - n)))
        valid.append(torch.arange(padded_len) < n)
    return torch.stack(patches), torch.stack(coords).long(), torch.stack(valid)


def run_case(case, out):
    torch.manual_seed(0)
    model = timm.create_model(case["name"], num_classes=NUM_CLASSES, **case.get("kwargs", {}))
    generator = torch.Generator().manual_seed(1)
    model_parity.perturb(model, generator)
    patch_size = case.get("batch_patch", model.get_patch_size()[0])
    channels_last = case.get("kwargs", {}).get("patchify_channels_last", True)
    patches, coord, valid = patch_batch(generator, patch_size, channels_last)
    if "batch_patch" in case:
        b, n = patches.shape[:2]
        unflat = (patch_size, patch_size, -1) if channels_last else (-1, patch_size, patch_size)
        patches = patches.reshape(b, n, *unflat)
    target = torch.randint(0, NUM_CLASSES, (patches.shape[0],), generator=generator)
    batch = {"patches": patches, "patch_coord": coord, "patch_valid": valid}
    prefix = case["id"] + "."
    for k, v in model.state_dict().items():
        out[prefix + "model." + k] = v.detach().clone().contiguous()
    model.eval()
    with torch.no_grad():
        out[prefix + "logits"] = model(batch)
    model.train()
    loss = F.cross_entropy(model(batch), target)
    loss.backward()
    out[prefix + "loss"] = loss.detach().reshape(1)
    for k, p in model.named_parameters():
        out[prefix + "grad." + k] = p.grad.detach().clone()
    out[prefix + "patches"] = patches
    out[prefix + "patch_coord"] = coord
    out[prefix + "patch_valid"] = valid
    out[prefix + "target"] = target


def main():
    torch.set_num_threads(1)
    out_path, cases = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    for case in cases:
        run_case(case, out)
    save_file(out, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
