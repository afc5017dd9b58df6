"""Python oracle for test_efficientnet: timm's EfficientNet / MobileNetV2 / MobileNetV3 as the reference.

info --names efficientnet_b0,mobilenetv3_small_050,...
    Prints one JSON object: for each name at num_classes=1000 its state_dict
    keys with shapes and dtypes (in order), parameter count, default
    pretrained cfg, group_matcher(coarse) for both values of coarse, and the
    per-block drop-path rates (the model is made with drop_path_rate=0.2) ("models"); and the names
    timm registers for efficientnet_b*, mobilenetv2_*, mobilenetv3_* ("listed").

generate --dir D --cases efficientnet_b0:3,mobilenetv3_small_050:1
    For each case writes D/<name>_c<in_chans>.expected.safetensors holding
    the model's state_dict ("model.<key>", random weights, BN statistics
    randomised, taken before any step), an input batch (2 x in_chans x 64 x 64),
    eval logits, train-mode logits, the loss and the gradients of a
    cross-entropy loss for the stem, bn1, the first and the last block and the
    head ("grad.<key>"), bn1's buffers after that step ("after.<key>"), and as
    metadata the gradient keys.

check --dir D --cases ...
    For each case loads the C++ model's weights D/<name>_c<in_chans>.cpp.safetensors
    into a fresh timm model with model.load_state_dict(load_file(...)) (strict)
    and compares its eval logits on the C++ input with the C++ logits in
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
    cases = []
    for item in text.split(","):
        name, chans = item.split(":")
        cases.append((name, int(chans)))
    return cases


def stem(directory, name, in_chans):
    return f"{directory}/{name}_c{in_chans}"


def randomize_batchnorm(model, generator):
    # timm's init makes BN an identity in eval mode; random affine parameters
    # and running statistics exercise the eval path.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def drop_path_rates(model):
    rates = []
    for stage in model.blocks:
        for block in stage:
            dp = block.drop_path
            rates.append(dp.drop_prob if isinstance(dp, timm.layers.DropPath) else 0.0)
    return rates


def matcher_rules(value):
    # timm's group_matcher values: a regex string, or a list of (regex, suffix) pairs.
    if isinstance(value, str):
        return [[value, None]]
    return [[pattern, list(suffix) if suffix is not None else None] for pattern, suffix in value]


def group_matcher(model, coarse):
    return [[group, matcher_rules(value)] for group, value in model.group_matcher(coarse=coarse).items()]


def grad_keys(model):
    params = dict(model.named_parameters())
    last_stage = len(model.blocks) - 1
    last = f"blocks.{last_stage}.{len(model.blocks[last_stage]) - 1}."
    keys = []
    for k in params:
        if k.startswith(("conv_stem.", "bn1.", "blocks.0.0.", last, "conv_head.", "bn2.", "classifier.")):
            keys.append(k)
    return keys


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
    save_file(out, stem(directory, name, in_chans) + ".expected.safetensors", metadata={"grad_keys": json.dumps(keys)})
    print(f"{name} in_chans={in_chans}: logits_eval max |.| {out['logits_eval'].abs().max().item():.4g}, "
          f"loss {loss.item():.6g}, {len(keys)} gradients")


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
        # drop_path_rate adds no keys: one model serves the structure and the schedule.
        model = timm.create_model(name, drop_path_rate=0.2)
        cfg = model.pretrained_cfg
        state = model.state_dict()
        models[name] = {
            "keys": list(state.keys()),
            "shapes": [list(v.shape) for v in state.values()],
            "dtypes": [str(v.dtype).replace("torch.", "") for v in state.values()],
            "param_count": sum(p.numel() for p in model.parameters()),
            "input_size": list(cfg["input_size"]),
            "crop_pct": cfg["crop_pct"],
            "interpolation": cfg["interpolation"],
            "mean": list(cfg["mean"]),
            "std": list(cfg["std"]),
            "crop_mode": cfg.get("crop_mode", "center"),
            "first_conv": cfg["first_conv"],
            "classifier": cfg["classifier"],
            "group_matcher_fine": group_matcher(model, False),
            "group_matcher_coarse": group_matcher(model, True),
            "drop_rate": model.drop_rate,
            "drop_path_rates": drop_path_rates(model),
        }
        del model
    listed = timm.list_models("efficientnet_b*") + timm.list_models("mobilenetv2_*") + \
        timm.list_models("mobilenetv3_*")
    print(json.dumps({"models": models, "listed": listed}))


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
