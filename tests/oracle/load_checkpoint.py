"""Loads a timm-cpp safetensors checkpoint strictly into a Python timm model.

Usage: load_checkpoint.py MODEL FILE [--num-classes N] [--in-chans C] [--model-dtype D]
Prints "loaded N tensors" on success; any missing or unexpected key, or a
shape mismatch, raises and exits non-zero. With --model-dtype the model is
converted as train.py converts it (model.to(dtype=...)) and every tensor of
the file must have the dtype of that model's state_dict, what train.py saves.
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
    parser.add_argument("--model-dtype", default=None)
    args = parser.parse_args()
    model = timm.create_model(args.model, num_classes=args.num_classes, in_chans=args.in_chans)
    dtype = torch.float32
    if args.model_dtype:
        dtype = getattr(torch, args.model_dtype)
        model.to(dtype=dtype)
    state = safetensors.torch.load_file(args.file)
    if args.model_dtype:
        expected = {k: v.dtype for k, v in model.state_dict().items()}
        wrong = [f"{k}: {v.dtype} (timm: {expected[k]})"
                 for k, v in state.items() if k in expected and v.dtype != expected[k]]
        assert not wrong, f"{len(wrong)} tensors differ in dtype from train.py's: " + ", ".join(wrong[:5])
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        out = model(torch.zeros(1, args.in_chans, 28, 28, dtype=dtype))
    assert torch.isfinite(out).all(), "non-finite logits"
    print(f"loaded {len(state)} tensors" + (f" as {args.model_dtype}" if args.model_dtype else ""))


if __name__ == "__main__":
    main()
