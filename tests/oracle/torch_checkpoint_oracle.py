"""Python oracle for test_load_weights: files written by torch.save as timm users have them.

write --dir D --model resnet18 --num-classes 10
    Writes, from one timm model (random weights, BatchNorm statistics randomised so
    eval logits exercise every layer) and a second one standing for its EMA:
      state_dict.pth         torch.save(model.state_dict())  (an OrderedDict)
      state_dict_p4.pth      the same with pickle protocol 4 (FRAME, MEMOIZE, short strings)
      train_checkpoint.pth.tar  timm's CheckpointSaver layout: epoch, arch, state_dict,
                             optimizer, version, args (an argparse.Namespace), metric,
                             state_dict_ema (the EMA model's weights)
      ddp_model.pth          {'model': state_dict with 'module.' prefixes} (a DDP wrapper)
      small.pth              a Linear(4, 3)'s state_dict, and from it:
      legacy.pth             the pre-1.6 non-zip format
      list.pth, no_state_dict.pth, bad_opcode.pth, truncated_pickle.pth, short_storage.pth
                             malformed or unsupported for a weights loader
      fuzz<i>.pth            small.pth with 1-4 random bytes of its pickle changed (200 files)
      expected.safetensors   input, logits (model), logits_ema (EMA model), and timm's
                             adapt_input_conv of the stem weight to 1 and 5 channels
Runs on CPU, float32, one thread.
"""
import argparse
import copy
import random
import sys
import zipfile

import torch
import timm
from timm.models import adapt_input_conv
from safetensors.torch import save_file

FUZZ_FILES = 200


def randomize_batchnorm(model, generator):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def make_model(name, num_classes, seed):
    torch.manual_seed(seed)
    model = timm.create_model(name, num_classes=num_classes)
    randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1))
    return model.eval()


def rewrite_zip(src, dst, edit):
    """Copies a torch.save archive, passing each (name, bytes) record through edit."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, edit(info.filename, zin.read(info.filename)))


def write(directory, name, num_classes):
    model = make_model(name, num_classes, seed=0)
    ema = make_model(name, num_classes, seed=10)
    d = directory
    torch.save(model.state_dict(), f"{d}/state_dict.pth")
    torch.save(model.state_dict(), f"{d}/state_dict_p4.pth", pickle_protocol=4)
    # A real checkpoint's optimizer state (momentum buffers), from a step of a throwaway copy.
    trained = copy.deepcopy(model).train()
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.1, momentum=0.9)
    trained(torch.randn(2, 3, 32, 32)).mean().backward()
    optimizer.step()
    train_args = argparse.Namespace(model=name, lr=0.1, opt_betas=None, epochs=3, input_size=(3, 224, 224))
    torch.save({
        "epoch": 2, "arch": name, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict(),
        "version": 2, "args": train_args, "metric": 12.5, "state_dict_ema": ema.state_dict(),
    }, f"{d}/train_checkpoint.pth.tar")
    torch.save({"model": {"module." + k: v for k, v in model.state_dict().items()}}, f"{d}/ddp_model.pth")
    # The malformed files need no big model: a Linear's state_dict shows every problem.
    small = torch.nn.Linear(4, 3).state_dict()
    torch.save(small, f"{d}/small.pth")
    torch.save(small, f"{d}/legacy.pth", _use_new_zipfile_serialization=False)
    torch.save([torch.zeros(2)], f"{d}/list.pth")
    torch.save({"epoch": 3, "args": train_args}, f"{d}/no_state_dict.pth")
    rewrite_zip(f"{d}/small.pth", f"{d}/bad_opcode.pth",
                lambda n, b: b[:2] + b"\xff" + b[3:] if n.endswith("data.pkl") else b)
    rewrite_zip(f"{d}/small.pth", f"{d}/truncated_pickle.pth",
                lambda n, b: b[: len(b) // 2] if n.endswith("data.pkl") else b)
    rewrite_zip(f"{d}/small.pth", f"{d}/short_storage.pth",
                lambda n, b: b[:8] if n.endswith("/data/0") else b)
    # Random byte changes in the pickle (the zip's CRCs still right): read or refused, never a crash.
    rng = random.Random(7)
    for i in range(FUZZ_FILES):
        def corrupt(n, b):
            if not n.endswith("data.pkl"):
                return b
            b = bytearray(b)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            return bytes(b)
        rewrite_zip(f"{d}/small.pth", f"{d}/fuzz{i}.pth", corrupt)

    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = {"input": x, "logits": model(x), "logits_ema": ema(x)}
    stem = model.state_dict()["conv1.weight"]
    out["adapted_stem_c1"] = adapt_input_conv(1, stem.clone())
    out["adapted_stem_c5"] = adapt_input_conv(5, stem.clone())
    save_file({k: v.contiguous() for k, v in out.items()}, f"{d}/expected.safetensors")
    print(f"wrote {name} checkpoints to {d}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["write"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--num-classes", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    write(args.dir, args.model, args.num_classes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
