"""Python oracle for timm-cpp's distributed library tests (test_dist_*).

sampler CASES_JSON
    CASES_JSON: a list of cases, each {"kind": "distributed" | "repeat_aug",
    "size": dataset length, "epoch": e, and the sampler's keyword arguments
    ("num_replicas", "rank", "shuffle", and "seed", "drop_last" for
    torch.utils.data.DistributedSampler; "num_repeats", "selected_round",
    "selected_ratio" for timm.data.distributed_sampler.RepeatAugSampler)}.
    Prints a JSON list: each case's indices after set_epoch(e).

splitbn --input IN --output OUT --num-splits K --steps S
    IN (safetensors): "state.<key>" a state_dict for the model below,
    "train.<i>" and "upstream.<i>" the input and d loss / d output of train
    step i, "eval" an eval input. Builds nn.Sequential(conv=Conv2d(3, 4, 3,
    bias=False), bn=BatchNorm2d(4), bnact=timm's BatchNormAct2d(4, ReLU)),
    loads the state, runs timm's convert_splitbn_model(model, K), then S
    train steps (forward, (y * upstream).sum().backward(), gradients
    accumulating) and one eval forward. OUT: "out.<i>", "input_grad.<i>",
    "grad.<param>", "state.<key>" (after the steps, aux_bn included), "eval".

Runs on CPU, float32.
"""
import argparse
import json
import sys
from collections import OrderedDict

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file
from timm.data.distributed_sampler import RepeatAugSampler
from timm.layers import BatchNormAct2d
from timm.layers.split_batchnorm import convert_splitbn_model
from torch.utils.data import DistributedSampler


def sampler_indices(case):
    dataset = range(case['size'])
    kwargs = {k: v for k, v in case.items() if k not in ('kind', 'size', 'epoch')}
    if case['kind'] == 'distributed':
        sampler = DistributedSampler(dataset, **kwargs)
    elif case['kind'] == 'repeat_aug':
        sampler = RepeatAugSampler(dataset, **kwargs)
    else:
        raise ValueError(f"unknown sampler kind {case['kind']!r}")
    sampler.set_epoch(case['epoch'])
    indices = list(iter(sampler))
    assert len(indices) == len(sampler)
    return indices


def splitbn(args):
    torch.set_num_threads(1)
    data = load_file(args.input)
    model = nn.Sequential(OrderedDict(
        conv=nn.Conv2d(3, 4, 3, bias=False), bn=nn.BatchNorm2d(4), bnact=BatchNormAct2d(4, act_layer=nn.ReLU)))
    model.load_state_dict({k[len('state.'):]: v for k, v in data.items() if k.startswith('state.')})
    model = convert_splitbn_model(model, num_splits=args.num_splits)
    out = {}
    model.train()
    for i in range(args.steps):
        x = data[f'train.{i}'].clone().requires_grad_(True)
        y = model(x)
        (y * data[f'upstream.{i}']).sum().backward()
        out[f'out.{i}'] = y.detach()
        out[f'input_grad.{i}'] = x.grad
    for name, p in model.named_parameters():
        out[f'grad.{name}'] = p.grad
    for name, t in model.state_dict().items():
        out[f'state.{name}'] = t.clone()
    model.eval()
    with torch.no_grad():
        out['eval'] = model(data['eval'])
    save_file({k: v.contiguous() for k, v in out.items()}, args.output)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == 'sampler':
        print(json.dumps([sampler_indices(c) for c in json.loads(sys.argv[2])]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument('command', choices=['splitbn'])
    parser.add_argument('--input', required=True)
    parser.add_argument('--output', required=True)
    parser.add_argument('--num-splits', type=int, required=True)
    parser.add_argument('--steps', type=int, required=True)
    splitbn(parser.parse_args())


if __name__ == '__main__':
    main()
