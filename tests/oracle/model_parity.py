"""Shared oracle for the model-plugin parity tests (resnet_oracle.py, regnet_oracle.py,
efficientnet_oracle.py, vit_oracle.py, convnext_oracle.py, swin_oracle.py; the C++ side is
tests/support/model_parity.hpp).

A case is a JSON object {"id", "name", "in_chans", "img_size", "img_height", "batch",
"kwargs", "after_buffers", "reparam"}: the model name, timm.create_model keyword arguments besides
num_classes=10 and in_chans (e.g. {"global_pool": "avg"}), the input width and
height (img_height, optional: img_size), and
the buffers (BatchNorm running statistics) to record after the train step. Modes:

generate --dir D --cases JSON
    For each case writes D/<id>.expected.safetensors: the model's state_dict
    ("model.<key>", random weights: timm's init with the norm affines, biases,
    layer-scale factors and BatchNorm running statistics perturbed so nothing
    sits at an identity), an input, eval logits, the eval-mode halves of
    forward ("features_eval" = forward_features(input), "head_eval" =
    forward_head(features), "pre_logits_eval" = forward_head(features,
    pre_logits=True)), train-mode logits, the cross-entropy loss and the
    gradients of the parameters listed in the metadata ("grad.<key>"), the
    case's "after_buffers" after that train step ("after.<key>"), plus as
    metadata the state_dict key order, the parameter count and the per-block
    drop-path rates for drop_path_rate=0.2. Also forward_intermediates' outputs for
    each of INTERMEDIATES_VARIANTS ("inter.<variant>.<i>", "inter.<variant>.final";
    metadata "intermediates": counts, or timm's error) and feature_info; and the eval
    logits of the model and input in bfloat16 ("logits_eval_bf16", as float32); with
    "reparam", timm's reparameterize_model of the eval model: its state_dict
    ("reparam.model.<key>", metadata "reparam_state_dict_keys") and eval logits
    ("reparam.logits_eval").
check --dir D --cases JSON
    Loads D/<id>.cpp.safetensors with model.load_state_dict(load_file(...))
    (strict) and compares its eval logits on D/<id>.probe.safetensors' input
    with the C++ logits there. Exits 1 on a mismatch.
info --names a,b,... [--patterns p,q,...]
    One JSON object: for each name at timm's defaults (num_classes=1000,
    pretrained=False) but drop_path_rate=0.2, which adds no state, built on
    the meta device (shapes only, no memory), its state_dict keys, shapes and
    dtypes, parameter count, default pretrained cfg, no_weight_decay,
    group_matcher, drop_rate, per-block drop-path rates and feature_info ("models"); and the
    names timm.list_models(PATTERN) gives ("list").
initstats --names a,b,...
    One JSON object: for each name, per state_dict entry of a freshly
    initialised model (num_classes=1000): numel, mean, std, min, max.

CPU, float32, one thread.
"""
import argparse
import copy
import json
import sys

import torch
import torch.nn.functional as F
import timm
from safetensors.torch import load_file, save_file

NUM_CLASSES = 10
TRAIN_SEED = 7  # model_parity.hpp's kTrainSeed
ATOL = 1e-4
RTOL = 1e-4


def stem(directory, case):
    return f"{directory}/{case['id']}"


def create(case, **extra):
    return timm.create_model(case["name"], num_classes=NUM_CLASSES, in_chans=case["in_chans"],
                             **case.get("kwargs", {}), **extra)


def create_meta(case, **extra):
    # Structure only (no memory, no init time): enough for the drop-path rates.
    with torch.device("meta"):
        return create(case, **extra)


def perturb(model, generator):
    # timm's init leaves norm weights at one, biases at zero and layer-scale
    # factors at ~1e-6, which would hide parts of the network from a
    # comparison; random values exercise every parameter.
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "gamma":
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5)
            elif p.ndim == 1 and leaf == "weight":
                p.copy_(torch.rand(p.shape, generator=generator) * 0.5 + 0.75)
            elif leaf == "bias":
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
            elif leaf in ("cls_token", "dist_token", "reg_token"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
        # BatchNorm's running statistics start at (0, 1): eval mode would be an
        # identity there.
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


# forward_intermediates keyword arguments the parity cases try (model_parity.hpp's
# kIntermediatesVariants has the same): every level; the last two, stopping early;
# the first and last with the final norm; one level stopping early with the
# final features; and the token layout of a ViT.
INTERMEDIATES_VARIANTS = {
    "all": {},
    "last2_early_only": dict(indices=2, stop_early=True, intermediates_only=True),
    "ends_norm": dict(indices=[0, -1], norm=True),
    "second_early": dict(indices=[1], stop_early=True),
    "nlc": dict(output_fmt="NLC"),
}


def record_intermediates(model, x, out):
    # Each variant's outputs as "inter.<variant>.<i>" and "inter.<variant>.final";
    # returns per variant the number of intermediates and whether there are final
    # features, or timm's error for a combination the model refuses.
    summary = {}
    for variant, kwargs in INTERMEDIATES_VARIANTS.items():
        try:
            result = model.forward_intermediates(x, **kwargs)
        except (AssertionError, ValueError) as e:
            summary[variant] = {"error": str(e)}
            continue
        final, inters = (None, result) if kwargs.get("intermediates_only") else result
        for i, t in enumerate(inters):
            out[f"inter.{variant}.{i}"] = t.clone().contiguous()
        if final is not None:
            out[f"inter.{variant}.final"] = final.clone().contiguous()
        summary[variant] = {"count": len(inters), "final": final is not None}
    return summary


def feature_info(model):
    return [[f["num_chs"], f["reduction"], f["module"]] for f in model.feature_info]


def record_reparameterized(model, x, out):
    # timm's reparameterize_model (validate.py --reparam) on a copy of the
    # eval-mode model: its state_dict ("reparam.model.<key>") and eval logits.
    folded = timm.models.reparameterize_model(model)
    for k, v in folded.state_dict().items():
        out[f"reparam.model.{k}"] = v.detach().clone().contiguous()
    out["reparam.logits_eval"] = folded(x)
    return list(folded.state_dict().keys())


def generate(directory, case, grad_keys_fn, drop_path_rates_fn):
    torch.manual_seed(0)
    model = create(case)
    generator = torch.Generator().manual_seed(1)
    perturb(model, generator)
    width = case["img_size"]
    height = case.get("img_height") or width
    x = torch.randn(case["batch"], case["in_chans"], height, width, generator=generator)
    target = torch.randint(0, NUM_CLASSES, (case["batch"],), generator=generator)

    out = {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    model.eval()
    with torch.no_grad():
        out["logits_eval"] = model(x)
        # The two halves of forward (clones: a pooled token or an unpooled
        # head's output is a view of the features, and save_file refuses
        # tensors that share memory).
        features = model.forward_features(x)
        out["features_eval"] = features.clone().contiguous()
        out["head_eval"] = model.forward_head(features).clone().contiguous()
        out["pre_logits_eval"] = model.forward_head(features, pre_logits=True).clone().contiguous()
        intermediates = record_intermediates(model, x, out)
        # --model-dtype bfloat16: the same weights and input in bfloat16 (model.to(dtype), as train.py).
        model_bf16 = copy.deepcopy(model).to(torch.bfloat16)
        out["logits_eval_bf16"] = model_bf16(x.to(torch.bfloat16)).float()
        del model_bf16
        reparam_keys = record_reparameterized(model, x, out) if case.get("reparam") else []
    model.train()
    # Random layers (DropBlock) draw from the default generator: the C++ side
    # seeds it the same way before its train step.
    torch.manual_seed(TRAIN_SEED)
    logits_train = model(x)
    loss = F.cross_entropy(logits_train, target)
    loss.backward()
    params = dict(model.named_parameters())
    keys = grad_keys_fn(model)
    for k in keys:
        out[f"grad.{k}"] = params[k].grad.detach().clone()
    buffers = dict(model.named_buffers())
    for k in case.get("after_buffers", []):
        out[f"after.{k}"] = buffers[k].detach().clone()
    out["input"] = x
    out["target"] = target
    out["logits_train"] = logits_train.detach()
    out["loss"] = loss.detach().reshape(())
    metadata = {
        "state_dict_keys": json.dumps(list(model.state_dict().keys())),
        "param_count": str(sum(p.numel() for p in model.parameters())),
        "grad_keys": json.dumps(keys),
        "drop_path_rates": json.dumps(drop_path_rates_fn(create_meta(case, drop_path_rate=0.2))),
        "intermediates": json.dumps(intermediates),
        "feature_info": json.dumps(feature_info(model)),
        "reparam_state_dict_keys": json.dumps(reparam_keys),
    }
    save_file(out, stem(directory, case) + ".expected.safetensors", metadata=metadata)
    print(f"{case['id']}: logits_eval max |.| {out['logits_eval'].abs().max().item():.4g}, loss {loss.item():.6g}")


def check(directory, case):
    model = create(case)
    model.load_state_dict(load_file(stem(directory, case) + ".cpp.safetensors"))
    model.eval()
    probe = load_file(stem(directory, case) + ".probe.safetensors")
    with torch.no_grad():
        logits = model(probe["input"])
    expected = probe["logits_eval"]
    diff = (logits - expected).abs().max().item()
    ok = torch.allclose(logits, expected, atol=ATOL, rtol=RTOL)
    print(f"{case['id']}: C++ weights in timm, eval logits max abs diff {diff:.3g} "
          f"(atol {ATOL}, rtol {RTOL}): {'ok' if ok else 'MISMATCH'}")
    return ok


def info(names, patterns, drop_path_rates_fn):
    models = {}
    for name in names:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False, drop_path_rate=0.2)
        cfg = model.pretrained_cfg
        classifier = cfg["classifier"]
        state = model.state_dict()
        entry = {
            "keys": list(state.keys()),
            "shapes": [list(v.shape) for v in state.values()],
            "dtypes": [str(v.dtype).replace("torch.", "") for v in state.values()],
            "param_count": sum(p.numel() for p in model.parameters()),
            "input_size": list(cfg["input_size"]),
            "crop_pct": cfg["crop_pct"],
            "test_input_size": list(cfg["test_input_size"]) if cfg.get("test_input_size") else None,
            "test_crop_pct": cfg.get("test_crop_pct"),
            "interpolation": cfg["interpolation"],
            "mean": list(cfg["mean"]),
            "std": list(cfg["std"]),
            "crop_mode": cfg.get("crop_mode", "center"),
            "first_conv": cfg["first_conv"],
            "classifier": classifier if isinstance(classifier, str) else classifier[0],
            "hf_hub_id": cfg.get("hf_hub_id") or "",
            "pretrained_num_classes": cfg.get("num_classes", 1000),
            "no_weight_decay": sorted(model.no_weight_decay()) if hasattr(model, "no_weight_decay") else [],
            "group_matcher": {c: model.group_matcher(coarse=c == "coarse") for c in ("fine", "coarse")},
            "drop_path_rates": drop_path_rates_fn(model),
            "feature_info": feature_info(model),
        }
        if hasattr(model, "drop_rate"):
            entry["drop_rate"] = model.drop_rate
        models[name] = entry
        del model
    listed = {p: timm.list_models(p) for p in patterns}
    print(json.dumps({"models": models, "list": listed}))


def initstats(names):
    stats = {}
    for name in names:
        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False)
        entry = {}
        for k, v in model.state_dict().items():
            v = v.double()
            entry[k] = [v.numel(), v.mean().item(), v.std().item() if v.numel() > 1 else 0.0,
                        v.min().item(), v.max().item()]
        stats[name] = entry
    print(json.dumps(stats))


def main(grad_keys_fn, drop_path_rates_fn, doc):
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["generate", "check", "info", "initstats"])
    parser.add_argument("--dir")
    parser.add_argument("--cases", help="JSON list of cases")
    parser.add_argument("--names", help="name,... (info, initstats)")
    parser.add_argument("--patterns", default="", help="pattern,... for timm.list_models (info)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.mode == "info":
        info(args.names.split(","), [p for p in args.patterns.split(",") if p], drop_path_rates_fn)
        return 0
    if args.mode == "initstats":
        initstats(args.names.split(","))
        return 0
    ok = True
    for case in json.loads(args.cases):
        if args.mode == "generate":
            generate(args.dir, case, grad_keys_fn, drop_path_rates_fn)
        else:
            ok = check(args.dir, case) and ok
    return 0 if ok else 1


def selected_grad_keys(model, block_prefixes):
    """Every parameter outside the blocks plus those of the first and last block
    of each prefix (e.g. 'blocks.'), enough to cover each parameter kind
    without writing every gradient of a large model."""
    keys = []
    for name, _ in model.named_parameters():
        prefix = next((p for p in block_prefixes if name.startswith(p)), None)
        if prefix is None:
            keys.append(name)
            continue
        index = int(name[len(prefix):].split(".", 1)[0])
        count = len(model.get_submodule(prefix.rstrip(".")))
        if index in (0, count - 1):
            keys.append(name)
    return keys
