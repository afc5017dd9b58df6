"""Test oracle for Mixup / CutMix: runs timm.data.mixup.Mixup on a batch and
records every numpy draw it makes, so the C++ test can replay the same draws.

Usage: mixup_oracle.py <outdir> <case> [<case> ...]
  case = name:mixup_alpha:cutmix_alpha:minmax_lo:minmax_hi:prob:switch_prob:mode:smoothing:seed:enabled
  (minmax_lo/hi 'none' for no --cutmix-minmax; enabled 0|1 as mixup_enabled)

Writes to <outdir>:
  input.f32              the batch before mixing, float32 (N, C, H, W) raw
  targets.txt            the N class indices
  shape.txt              "N C H W num_classes"
  <name>.images.f32      timm's mixed batch, float32 raw
  <name>.targets.f32     timm's soft targets (N, num_classes), float32 raw
  <name>.draws.txt       one draw a line in call order:
                         "rand <value>" | "beta <alpha> <value>" | "randint <lo> <hi> <value>"
                         (array draws are written one element a line, in index order)
"""
import os
import sys

import numpy as np
import torch

import timm.data.mixup as mixup_module
from timm.data.mixup import Mixup

N, C, H, W, NUM_CLASSES = 8, 3, 13, 17, 5


class Recorder:
    """Wraps np.random.rand / beta / randint, logging each value drawn."""

    def __init__(self):
        self.lines = []
        self.real = np.random

    def rand(self, *size):
        v = self.real.rand(*size)
        for x in np.atleast_1d(v).ravel():
            self.lines.append(f'rand {float(x)!r}')
        return v

    def beta(self, a, b, size=None):
        assert a == b
        v = self.real.beta(a, b, size=size)
        for x in np.atleast_1d(v).ravel():
            self.lines.append(f'beta {float(a)!r} {float(x)!r}')
        return v

    def randint(self, low, high=None, size=None):
        v = self.real.randint(low, high, size=size)
        lo = np.broadcast_to(low, np.shape(v)) if size is not None else low
        hi = np.broadcast_to(high, np.shape(v)) if size is not None else high
        for x, l, h in zip(np.atleast_1d(v).ravel(), np.atleast_1d(lo).ravel(), np.atleast_1d(hi).ravel()):
            self.lines.append(f'randint {int(l)} {int(h)} {int(x)}')
        return v


class FakeNp:
    """Stands in for the `np` module inside timm.data.mixup: everything is numpy's but np.random."""

    def __init__(self, recorder):
        self.random = recorder

    def __getattr__(self, name):
        return getattr(np, name)


def run_case(outdir, spec, x0, target):
    (name, mixup_alpha, cutmix_alpha, lo, hi, prob, switch_prob, mode, smoothing, seed, enabled) = spec.split(':')
    minmax = None if lo == 'none' else [float(lo), float(hi)]
    mix = Mixup(mixup_alpha=float(mixup_alpha), cutmix_alpha=float(cutmix_alpha), cutmix_minmax=minmax,
                prob=float(prob), switch_prob=float(switch_prob), mode=mode, label_smoothing=float(smoothing),
                num_classes=NUM_CLASSES)
    mix.mixup_enabled = enabled == '1'
    np.random.seed(int(seed))
    recorder = Recorder()
    real_np = mixup_module.np
    mixup_module.np = FakeNp(recorder)
    try:
        x, y = mix(x0.clone(), target.clone())
    finally:
        mixup_module.np = real_np
    x.numpy().astype(np.float32).tofile(os.path.join(outdir, f'{name}.images.f32'))
    y.numpy().astype(np.float32).tofile(os.path.join(outdir, f'{name}.targets.f32'))
    with open(os.path.join(outdir, f'{name}.draws.txt'), 'w') as f:
        f.write(''.join(line + '\n' for line in recorder.lines))


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(N, C, H, W, generator=g)
    target = torch.randint(0, NUM_CLASSES, (N,), generator=g)
    x0.numpy().tofile(os.path.join(outdir, 'input.f32'))
    with open(os.path.join(outdir, 'targets.txt'), 'w') as f:
        f.write(' '.join(str(int(t)) for t in target) + '\n')
    with open(os.path.join(outdir, 'shape.txt'), 'w') as f:
        f.write(f'{N} {C} {H} {W} {NUM_CLASSES}\n')
    for spec in sys.argv[2:]:
        run_case(outdir, spec, x0, target)


if __name__ == '__main__':
    main()
