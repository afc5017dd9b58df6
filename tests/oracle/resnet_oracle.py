"""Python oracle for test_resnet: timm's ResNets as the reference.

generate --dir D --cases resnet18:3,resnet50:1
    For each case writes D/<name>_c<in_chans>.expected.safetensors holding the
    model's state_dict ("model.<key>", taken before any training step), an
    input batch, eval logits, train-mode logits, the gradients of a
    cross-entropy loss for a few parameters ("grad.<key>"), BN buffers after
    that train step ("after.<key>"), and as metadata the state_dict key order,
    the parameter count and timm's per-block drop-path rates for
    drop_path_rate=0.2.

info --names resnet18d,seresnet18,...
    Prints one JSON object: for each name at num_classes=1000 its parameter
    count, state_dict size and default pretrained cfg ("models"), and
    timm.list_models('se*') ("list_se").

check --dir D --cases ...
    For each case loads the C++ model's weights D/<name>_c<in_chans>.cpp.safetensors
    into a fresh timm model with model.load_state_dict(load_file(...)) (strict)
    and compares its eval logits on the C++ input with the C++ logits in
    D/<name>_c<in_chans>.probe.safetensors. Exits 1 on a mismatch.

Runs on CPU, float32, one thread (the test harness sets OMP_NUM_THREADS=1).
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
GRAD_KEYS_BY_BLOCK = {"BasicBlock": "bn2", "Bottleneck": "bn3"}


def parse_cases(text):
    cases = []
    for item in text.split(","):
        name, chans = item.split(":")
        cases.append((name, int(chans)))
    return cases


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
    model = timm.create_model(name, num_classes=NUM_CLASSES, in_chans=in_chans, drop_path_rate=0.2)
    rates = []
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in stage:
            rates.append(block.drop_path.drop_prob if block.drop_path is not None else 0.0)
    return rates


def grad_keys(model):
    last_block = model.layer4[-1]
    last = f"layer4.{len(model.layer4) - 1}"
    last_bn = GRAD_KEYS_BY_BLOCK[type(last_block).__name__]
    stem_conv = "conv1.0.weight" if isinstance(model.conv1, torch.nn.Sequential) else "conv1.weight"
    keys = [stem_conv, "bn1.weight", "layer1.0.conv1.weight", f"{last}.{last_bn}.weight"]
    if last_block.se is not None:
        keys += [f"{last}.se.fc1.weight", f"{last}.se.fc2.bias"]
    if isinstance(model.layer2[0].downsample[0], torch.nn.AvgPool2d):
        keys.append("layer2.0.downsample.1.weight")
    return keys + ["fc.weight", "fc.bias"]


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
    for k in ("bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"):
        out[f"after.{k}"] = buffers[k].detach().clone()
    out["input"] = x
    out["target"] = target
    out["logits_train"] = logits_train.detach()
    out["loss"] = loss.detach().reshape(())

    metadata = {
        "state_dict_keys": json.dumps(list(model.state_dict().keys())),
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
        model = timm.create_model(name)
        cfg = model.pretrained_cfg
        models[name] = {
            "param_count": sum(p.numel() for p in model.parameters()),
            "state_dict_size": len(model.state_dict()),
            "input_size": list(cfg["input_size"]),
            "crop_pct": cfg["crop_pct"],
            "interpolation": cfg["interpolation"],
            "mean": list(cfg["mean"]),
            "std": list(cfg["std"]),
            "crop_mode": cfg.get("crop_mode", "center"),
            "first_conv": cfg["first_conv"],
            "classifier": cfg["classifier"],
        }
    print(json.dumps({"models": models, "list_se": timm.list_models("se*")}))


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
