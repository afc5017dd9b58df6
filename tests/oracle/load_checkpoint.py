"""Loads a timm-cpp safetensors checkpoint strictly into a Python timm model.

Usage: load_checkpoint.py MODEL FILE [--num-classes N] [--in-chans C]
Prints "loaded N tensors" on success; any missing or unexpected key, or a
shape mismatch, raises and exits non-zero.
"""
import argparse

import safetensors.torch
import timm
import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("file")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--in-chans", type=int, default=3)
    args = parser.parse_args()
    model = timm.create_model(args.model, num_classes=args.num_classes, in_chans=args.in_chans)
    state = safetensors.torch.load_file(args.file)
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(1, args.in_chans, 28, 28))
    assert torch.isfinite(out).all(), "non-finite logits"
    print(f"loaded {len(state)} tensors")


if __name__ == "__main__":
    main()
