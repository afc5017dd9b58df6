"""Oracle for tests/core/test_train_parts.cpp: timm's losses, ModelEmaV3,
dispatch_clip_grad, torch's GradScaler and CPU autocast on fixed inputs.

  train_parts_oracle.py OUT.safetensors
      writes the inputs (in.*) and timm's results (out.*) of every case.
"""
import sys

import torch
from torch import nn
from safetensors.torch import save_file

from timm.loss import BinaryCrossEntropy, JsdCrossEntropy, LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.utils import ModelEmaV3, dispatch_clip_grad


class Tiny(nn.Module):
    """Mirrors the TinyNet of test_train_parts.cpp: conv, bn, fc."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean((2, 3)))


def losses(out):
    logits = torch.randn(12, 10) * 3
    target = torch.randint(0, 10, (12,))
    dense = torch.softmax(torch.randn(12, 10), -1)
    out['in.logits'], out['in.target'], out['in.dense'] = logits, target, dense
    out['out.ls_ce_0.1'] = LabelSmoothingCrossEntropy(0.1)(logits, target)
    out['out.soft_ce'] = SoftTargetCrossEntropy()(logits, dense)
    out['out.bce_0.1'] = BinaryCrossEntropy(smoothing=0.1)(logits, target)
    out['out.bce_thresh'] = BinaryCrossEntropy(smoothing=0.1, target_threshold=0.2)(logits, target)
    out['out.bce_pos'] = BinaryCrossEntropy(smoothing=0.0, pos_weight=2.0)(logits, target)
    out['out.bce_sum'] = BinaryCrossEntropy(smoothing=0.1, sum_classes=True)(logits, target)
    out['out.bce_dense'] = BinaryCrossEntropy(target_threshold=0.15)(logits, dense)
    out['out.jsd_0.1'] = JsdCrossEntropy(num_splits=3, smoothing=0.1)(logits, target)
    out['out.jsd_0'] = JsdCrossEntropy(num_splits=2, smoothing=0.0)(logits, target)


def model_ema(out):
    model = Tiny()
    for k, v in model.state_dict().items():
        if v.is_floating_point():
            v.copy_(torch.randn_like(v))
        out['in.ema.init.' + k] = v.clone()
    ema = ModelEmaV3(model, decay=0.99, use_warmup=True, min_decay=0.1)
    with torch.no_grad():
        for step in range(1, 6):
            for k, v in model.state_dict().items():
                if v.is_floating_point():
                    v.add_(torch.randn_like(v))
                else:
                    v.add_(step)
                out[f'in.ema.step{step}.' + k] = v.clone()
            ema.update(model, step=step)
    for k, v in ema.module.state_dict().items():
        out['out.ema.' + k] = v.clone()


def clip_grad(out):
    shapes = [(4, 3, 3, 3), (4,), (3, 4), (3,)]
    for mode, value in (('norm', 1.0), ('value', 0.05), ('agc', 0.01)):
        params = []
        for i, shape in enumerate(shapes):
            p = nn.Parameter(torch.randn(shape) * 0.1)
            p.grad = torch.randn(shape) * (5.0 if i % 2 == 0 else 0.001)
            out[f'in.clip.{mode}.p{i}'] = p.detach().clone()
            out[f'in.clip.{mode}.g{i}'] = p.grad.clone()
            params.append(p)
        dispatch_clip_grad(params, value, mode=mode)
        for i, p in enumerate(params):
            out[f'out.clip.{mode}.g{i}'] = p.grad.clone()


def grad_scaler(out):
    torch.manual_seed(3)
    w = nn.Parameter(torch.randn(5, 4))
    out['in.scaler.w'] = w.detach().clone()
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler('cpu', init_scale=1024.0, growth_interval=2)
    for step in range(6):
        x = torch.randn(3, 4)
        if step == 2:
            x[0, 0] = float('inf')
        out[f'in.scaler.x{step}'] = x
        loss = (x @ w.t()).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        dispatch_clip_grad([w], 1.0, mode='norm')
        scaler.step(opt)
        scaler.update()
        out[f'out.scaler.w{step}'] = w.detach().clone()
        out[f'out.scaler.scale{step}'] = torch.tensor(scaler.get_scale())


def autocast(out):
    model = Tiny().eval()
    for k, v in model.state_dict().items():
        if v.is_floating_point():
            v.copy_(torch.randn_like(v).abs() + 0.1 if k.endswith('running_var') else torch.randn_like(v))
        out['in.amp.' + k] = v.clone()
    x = torch.randn(2, 3, 8, 8)
    out['in.amp.x'] = x
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        y = model(x)
    out['out.amp.y'] = y.float()
    out['out.amp.dtype_is_bf16'] = torch.tensor(int(y.dtype == torch.bfloat16))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = {}
    for case in (losses, model_ema, clip_grad, grad_scaler, autocast):
        case(out)
    save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[1])


if __name__ == '__main__':
    main()
