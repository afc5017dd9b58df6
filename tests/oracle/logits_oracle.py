"""Python oracle for test_timm_logits: timm's logits for a weights file and an input.

write --dir D --model regnetx_002 --num-classes 10
    Writes from one timm model (random weights, BatchNorm statistics randomised):
      weights.pth, weights.safetensors   its state_dict (torch.save and safetensors)
      input.npy, input.safetensors       an (N, 3, 64, 64) float32 batch ('input')
      images_exact/*.png                 256 x 256 RGB images: timm's eval resize is the
                                         identity there, only the center crop and normalise act
      images_resized/*.png               other sizes: the bicubic resize acts too
      expected.safetensors               logits_tensor (the batch), logits_exact and
                                         logits_resized (timm's resolve_data_config +
                                         create_transform eval pipeline on each folder, files
                                         in sorted order); features_all.<i> and
                                         features_sel.<i>: forward_intermediates of the batch
                                         (every level; indices [-1, 1] with norm)
Runs on CPU, float32, one thread.
"""
import argparse
import os
import sys

import numpy as np
import torch
import timm
from PIL import Image
from safetensors.torch import save_file


def randomize_batchnorm(model, generator):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def write_images(folder, sizes, rng):
    os.makedirs(folder, exist_ok=True)
    for i, (w, h) in enumerate(sizes):
        # Smooth content (a blurred random field) keeps resampling differences small, as photos do.
        small = rng.integers(0, 256, size=(h // 16 + 1, w // 16 + 1, 3), dtype=np.uint8)
        Image.fromarray(small).resize((w, h), Image.BILINEAR).save(f"{folder}/img{i}.png")


def folder_logits(model, transform, folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
    batch = torch.stack([transform(Image.open(f"{folder}/{f}").convert("RGB")) for f in files])
    with torch.no_grad():
        return model(batch)


def write(d, name, num_classes):
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=num_classes)
    randomize_batchnorm(model, torch.Generator().manual_seed(1))
    model.eval()
    torch.save(model.state_dict(), f"{d}/weights.pth")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, f"{d}/weights.safetensors")
    x = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    np.save(f"{d}/input.npy", x.numpy())
    save_file({"input": x}, f"{d}/input.safetensors")
    rng = np.random.default_rng(3)
    write_images(f"{d}/images_exact", [(256, 256), (256, 256)], rng)
    write_images(f"{d}/images_resized", [(300, 280), (200, 320)], rng)

    config = timm.data.resolve_data_config({}, model=model)
    transform = timm.data.create_transform(**config)
    with torch.no_grad():
        out = {"logits_tensor": model(x)}
        # timm-logits --features: every level, and levels 1 and -1 with norm.
        for i, t in enumerate(model.forward_intermediates(x, intermediates_only=True)):
            out[f"features_all.{i}"] = t.contiguous()
        for i, t in enumerate(model.forward_intermediates(x, indices=[-1, 1], norm=True, intermediates_only=True)):
            out[f"features_sel.{i}"] = t.contiguous()
    out["logits_exact"] = folder_logits(model, transform, f"{d}/images_exact")
    out["logits_resized"] = folder_logits(model, transform, f"{d}/images_resized")
    save_file(out, f"{d}/expected.safetensors")
    print(f"{name}: eval transform {transform}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["write"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--model", default="regnetx_002")
    parser.add_argument("--num-classes", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    write(args.dir, args.model, args.num_classes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
