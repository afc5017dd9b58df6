"""Python oracle for test_norm_act: timm's BatchNormAct2d, ConvNormAct and create_act_layer.

generate --cases FILE --out FILE.safetensors
    FILE is a JSON list of cases written by the C++ test, each one of
      {"name", "kind": "bn", "num_features", "act", "apply_act", "eps", "momentum" (null: cumulative)}
      {"name", "kind": "conv", "in", "out", "kernel", "stride", "dilation", "groups", "bias",
       "apply_norm", "apply_act", "act"}
      {"name", "kind": "act", "act"}
    For each case it builds timm's module (BatchNormAct2d / ConvNormAct /
    create_act_layer), randomises BN affine parameters and running statistics,
    and writes "<name>.state.<key>" (state_dict before any step), "<name>.input",
    "<name>.eval" (eval output), "<name>.train" (train-mode output of two steps:
    the second, so momentum=None's cumulative average shows),
    "<name>.grad_input" and "<name>.grad.<param>" (gradients of sum(out * probe)
    on the second step), "<name>.probe", "<name>.after.<buffer>" (buffers after
    the two steps). Metadata "<name>.keys": the state_dict keys as JSON.

Runs on CPU, float32, one thread.
"""
import argparse
import json
import sys

import torch
from safetensors.torch import save_file
from timm.layers import BatchNormAct2d, ConvNormAct, create_act_layer

BATCH = 2
SIZE = 9


def build(case):
    kind = case["kind"]
    if kind == "bn":
        return BatchNormAct2d(case["num_features"], eps=case["eps"], momentum=case["momentum"],
                              apply_act=case["apply_act"], act_layer=case["act"]), case["num_features"]
    if kind == "conv":
        return ConvNormAct(case["in"], case["out"], case["kernel"], stride=case["stride"],
                           dilation=case["dilation"], groups=case["groups"], bias=case["bias"],
                           apply_norm=case["apply_norm"], apply_act=case["apply_act"],
                           act_layer=case["act"]), case["in"]
    if kind == "act":
        return create_act_layer(case["act"]), 4
    raise ValueError(f"unknown kind {kind!r}")


def randomize(module, generator):
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=generator) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=generator) * 0.2)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=generator) * 0.5 + 0.75)


def generate(cases, out_path):
    out = {}
    metadata = {}
    generator = torch.Generator().manual_seed(0)
    for case in cases:
        name = case["name"]
        torch.manual_seed(len(out))
        module, in_chans = build(case)
        randomize(module, generator)
        x = torch.randn(BATCH, in_chans, SIZE, SIZE, generator=generator) * 2
        for key, value in module.state_dict().items():
            out[f"{name}.state.{key}"] = value.detach().clone().contiguous()
        metadata[f"{name}.keys"] = json.dumps(list(module.state_dict().keys()))
        module.eval()
        with torch.no_grad():
            out[f"{name}.eval"] = module(x).clone()
        module.train()
        with torch.no_grad():
            module(x * 0.5 + 0.3)
        xg = x.clone().requires_grad_(True)
        y = module(xg)
        probe = torch.randn(y.shape, generator=generator)
        (y * probe).sum().backward()
        out[f"{name}.input"] = x
        out[f"{name}.train"] = y.detach().clone()
        out[f"{name}.probe"] = probe
        out[f"{name}.grad_input"] = xg.grad.detach()
        for key, p in module.named_parameters():
            out[f"{name}.grad.{key}"] = p.grad.detach().clone()
        for key, b in module.named_buffers():
            out[f"{name}.after.{key}"] = b.detach().clone()
    save_file(out, out_path, metadata=metadata)
    print(f"{len(cases)} cases written")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["generate"])
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.cases) as f:
        cases = json.load(f)
    generate(cases, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
