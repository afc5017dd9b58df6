"""Python oracle for test_regnet: timm's RegNets as the reference.

generate --dir D --cases regnetx_002:3,regnety_002:1
    For each case writes D/<name>_c<in_chans>.expected.safetensors holding the
    model's state_dict ("model.<key>", before any training step), an input
    batch, eval logits, train-mode logits and loss, the gradients of a
    cross-entropy loss for a few parameters ("grad.<key>"), BN buffers after
    that train step ("after.<key>"), and as metadata the parameter count, the
    grad keys and timm's per-block drop-path rates for drop_path_rate=0.2.

info --names regnetx_002,...
    Prints one JSON object: for each name at num_classes=1000 its ordered
    state_dict keys with shapes, parameter count and default pretrained cfg
    ("models"), and timm.list_models('regnet[xy]_*') ("registered"). Models
    are built on the meta device: shapes only, no memory.

check --dir D --cases ...
    Loads the C++ model's weights D/<name>_c<in_chans>.cpp.safetensors into a
    fresh timm model with model.load_state_dict(load_file(...)) (strict) and
    compares its eval logits on the C++ input with the C++ logits in
    D/<name>_c<in_chans>.probe.safetensors. Exits 1 on a mismatch.

Runs on CPU, float32, one thread.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
import timm
from safetensors.torch import load_file, save_file

NUM_CLASSES = 10
IMAGE_SIZE = 64
BATCH = 2
ATOL = 1e-4
RTOL = 1e-4


def parse_cases(text):
    return [(name, int(chans)) for name, chans in (item.split(":") for item in text.split(","))]


def stem(directory, name, in_chans):
    return f"{directory}/{name}_c{in_chans}"


def randomize_batchnorm(model, generator):
    # timm's init makes BN an identity in eval mode and zeroes the last BN of
    # each block, which would hide most of the network from an eval-mode
    # comparison; random affine parameters and running statistics exercise it all.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def drop_path_rates(name, in_chans):
    with torch.device("meta"):
        model = timm.create_model(name, num_classes=NUM_CLASSES, in_chans=in_chans, drop_path_rate=0.2)
    rates = []
    for stage in (model.s1, model.s2, model.s3, model.s4):
        for block in stage.children():
            rates.append(block.drop_path.drop_prob if isinstance(block.drop_path, timm.layers.DropPath) else 0.0)
    return rates


def grad_keys(model):
    last_stage = model.s4
    last = f"s4.b{len(list(last_stage.children()))}"
    keys = ["stem.conv.weight", "stem.bn.weight", "s1.b1.conv1.conv.weight", "s1.b1.downsample.conv.weight",
            f"{last}.conv2.conv.weight", f"{last}.conv3.bn.weight"]
    if not isinstance(model.s1.b1.se, torch.nn.Identity):
        keys += ["s1.b1.se.fc1.weight", f"{last}.se.fc2.bias"]
    return keys + ["head.fc.weight", "head.fc.bias"]


def generate(directory, name, in_chans):
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=NUM_CLASSES, in_chans=in_chans)
    generator = torch.Generator().manual_seed(1)
    randomize_batchnorm(model, generator)
    x = torch.randn(BATCH, in_chans, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    target = torch.tensor([3, 7], dtype=torch.int64)

    out = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    model.eval()
    with torch.no_grad():
        out["logits_eval"] = model(x)

    model.train()
    logits_train = model(x)
    loss = F.cross_entropy(logits_train, target)
    loss.backward()
    params = dict(model.named_parameters())
    keys = grad_keys(model)
    for k in keys:
        out[f"grad.{k}"] = params[k].grad.detach().clone()
    buffers = dict(model.named_buffers())
    for k in ("stem.bn.running_mean", "stem.bn.running_var", "stem.bn.num_batches_tracked"):
        out[f"after.{k}"] = buffers[k].detach().clone()
    out["input"] = x
    out["target"] = target
    out["logits_train"] = logits_train.detach()
    out["loss"] = loss.detach().reshape(())
    metadata = {
        "param_count": str(sum(p.numel() for p in model.parameters())),
        "grad_keys": json.dumps(keys),
        "drop_path_rates": json.dumps(drop_path_rates(name, in_chans)),
    }
    save_file(out, stem(directory, name, in_chans) + ".expected.safetensors", metadata=metadata)
    print(f"{name} in_chans={in_chans}: logits_eval max |.| {out['logits_eval'].abs().max().item():.4g}, "
          f"loss {loss.item():.6g}")


def check(directory, name, in_chans):
    model = timm.create_model(name, num_classes=NUM_CLASSES, in_chans=in_chans)
    model.load_state_dict(load_file(stem(directory, name, in_chans) + ".cpp.safetensors"))
    model.eval()
    probe = load_file(stem(directory, name, in_chans) + ".probe.safetensors")
    with torch.no_grad():
        logits = model(probe["input"])
    expected = probe["logits_eval"]
    diff = (logits - expected).abs().max().item()
    ok = torch.allclose(logits, expected, atol=ATOL, rtol=RTOL)
    print(f"{name} in_chans={in_chans}: C++ weights in timm, eval logits max abs diff {diff:.3g} "
          f"(atol {ATOL}, rtol {RTOL}): {'ok' if ok else 'MISMATCH'}")
    return ok


def info(names):
    models = {}
    for name in names:
        with torch.device("meta"):
            model = timm.create_model(name)
        cfg = model.pretrained_cfg
        models[name] = {
            "param_count": sum(p.numel() for p in model.parameters()),
            "state_dict": [[k, list(v.shape)] for k, v in model.state_dict().items()],
            "input_size": list(cfg["input_size"]),
            "crop_pct": cfg["crop_pct"],
            "interpolation": cfg["interpolation"],
            "mean": list(cfg["mean"]),
            "std": list(cfg["std"]),
            "crop_mode": cfg.get("crop_mode", "center"),
            "first_conv": cfg["first_conv"],
            "classifier": cfg["classifier"],
        }
    print(json.dumps({"models": models, "registered": timm.list_models("regnet[xy]_*")}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["generate", "check", "info"])
    parser.add_argument("--dir")
    parser.add_argument("--cases", help="name:in_chans,...")
    parser.add_argument("--names", help="name,... (info)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.mode == "info":
        info(args.names.split(","))
        return 0
    ok = True
    for name, in_chans in parse_cases(args.cases):
        if args.mode == "generate":
            generate(args.dir, name, in_chans)
        else:
            ok = check(args.dir, name, in_chans) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
