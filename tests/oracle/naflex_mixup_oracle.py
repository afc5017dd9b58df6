"""Python oracle for test_naflex_mixup: timm's NaFlexMixup (timm/data/naflex_mixup.py) on
batches of images of different sizes, with every random draw recorded.

Usage: naflex_mixup_oracle.py OUT.safetensors CASES_JSON
    CASES_JSON: a list of cases {"id", "sizes": [[H, W], ...], "channels", "num_classes",
    "seed", and NaFlexMixup's keyword arguments "mixup_alpha", "cutmix_alpha", "switch_prob",
    "prob", "local_shuffle", "label_smoothing"}. Writes per case "<id>.in.<k>" (the uint8
    (C, H, W) images), "<id>.labels" (int64), "<id>.out.<k>" (the mixed images),
    "<id>.targets" (float32 (B, num_classes)) and "<id>.draws" (the draws as JSON text in
    uint8: "r:<random()>", "i:<lo>:<hi>:<value>", "s:<n>:<value>" for random.shuffle's
    _randbelow(n), "t:<torch.rand>", "B:<alpha>:<Beta sample>").
"""
import json
import sys
import types

import torch
from safetensors.torch import save_file

import timm.data.naflex_mixup as NM
from aug_oracle import RecordingRandom  # Python's random draws, recorded

MIXUP_ARGS = ("mixup_alpha", "cutmix_alpha", "switch_prob", "prob", "local_shuffle", "label_smoothing")


class RecordingShuffle(RecordingRandom):
    """RecordingRandom with random.shuffle, its _randbelow draws recorded."""

    def shuffle(self, x):
        for i in reversed(range(1, len(x))):
            j = self.rng._randbelow(i + 1)
            self.draws.append(f's:{i + 1}:{j}')
            x[i], x[j] = x[j], x[i]


def recording_torch(rec):
    """The torch names mix_batch_variable_size uses, its draws recorded."""

    def rand(*args, **kwargs):
        v = torch.rand(*args, **kwargs)
        rec.draws.append(f't:{v.item()!r}')
        return v

    class Beta:
        def __init__(self, a, b):
            self.alpha = a
            self.dist = torch.distributions.Beta(a, b)

        def sample(self):
            v = self.dist.sample()
            rec.draws.append(f'B:{self.alpha!r}:{v.item()!r}')
            return v

    return types.SimpleNamespace(rand=rand, distributions=types.SimpleNamespace(Beta=Beta), Tensor=torch.Tensor)


def run_case(case, out):
    g = torch.Generator().manual_seed(case["seed"])
    torch.manual_seed(case["seed"])
    imgs = [torch.randint(0, 256, (case["channels"], h, w), generator=g, dtype=torch.uint8) for h, w in case["sizes"]]
    labels = torch.randint(0, case["num_classes"], (len(imgs),), generator=g)
    mixup = NM.NaFlexMixup(num_classes=case["num_classes"], **{k: case[k] for k in MIXUP_ARGS if k in case})
    rec = RecordingShuffle(case["seed"])
    saved = NM.random, NM.torch
    NM.random, NM.torch = rec, recording_torch(rec)
    try:
        mixed, targets = mixup([x.clone() for x in imgs], labels)
    finally:
        NM.random, NM.torch = saved
    cid = case["id"]
    for k, (x, y) in enumerate(zip(imgs, mixed)):
        out[f"{cid}.in.{k}"] = x
        out[f"{cid}.out.{k}"] = y.contiguous()
    out[f"{cid}.labels"] = labels
    out[f"{cid}.targets"] = torch.stack(targets).float()
    out[f"{cid}.draws"] = torch.tensor(list(json.dumps(rec.draws).encode()), dtype=torch.uint8)


def main():
    out_path, cases = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    for case in cases:
        run_case(case, out)
    save_file(out, out_path)


if __name__ == "__main__":
    main()
