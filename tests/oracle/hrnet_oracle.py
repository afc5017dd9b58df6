"""Python oracle for test_hrnet: timm's HRNets (HighResolutionNet, head='classification') as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for two things:
- timm's HRNet takes no drop_path_rate (its constructor raises a TypeError on
  unknown keywords), so the drop_path_rate=0.2 the shared oracle passes to
  record per-block rates is left out here; HRNet has no drop path and its
  rates are the empty list.
- The shared perturbation leaves BN running statistics near (0, 1): in eval
  mode HRNet's repeated multi-branch fusions (sums of up to four paths after
  every module) then grow activations by orders of magnitude (eval logits
  around 1e7 for hrnet_w18 at 64 px). generate therefore recalibrates every
  BN's running statistics after the perturbation: reset, then one train-mode
  forward without gradients (cumulative average) on a fixed random 64 px batch
  from its own generator (seed 2), so eval normalises to about unit scale and
  the comparisons are well conditioned; the statistics stay non-trivial
  (num_batches_tracked is 1).
- Where timm's forward_intermediates stops early before the last branch
  (indices=[1], stop_early=True) it returns the list of the final stage's
  branch outputs as the final features; the C++ side's Intermediates holds one
  tensor and leaves them out, so they are recorded as none here too (the
  intermediates themselves are compared as usual).
"""
import sys

import timm
import torch
from timm.models.hrnet import HighResolutionNet

import model_parity

_create_model = timm.create_model
_forward_intermediates = HighResolutionNet.forward_intermediates
_perturb = model_parity.perturb


def perturb_and_calibrate(model, generator):
    _perturb(model, generator)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    calibration = torch.Generator().manual_seed(2)
    x = torch.randn(2, model.in_chans, 64, 64, generator=calibration)
    was_training = model.training
    with torch.no_grad():
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        model.train()
        model(x)
        for m in bns:
            m.momentum = 0.1
    model.train(was_training)


def create_model_without_drop_path(*args, drop_path_rate=None, **kwargs):
    return _create_model(*args, **kwargs)


def forward_intermediates_tensor_final(self, *args, **kwargs):
    result = _forward_intermediates(self, *args, **kwargs)
    if isinstance(result, tuple) and isinstance(result[0], list):
        return None, result[1]
    return result


def grad_keys(model):
    # The stem, layer1, the head (final layer, classifier) and elsewhere every
    # parameter under 65536 values (every BN, the narrower convs): each
    # parameter kind without writing every gradient of a wide model.
    keys = []
    for name, p in model.named_parameters():
        if (name.startswith(("conv1.", "bn1.", "conv2.", "bn2.", "layer1.", "final_layer.", "classifier."))
                or p.numel() < 65536):
            keys.append(name)
    return keys


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model_without_drop_path
    HighResolutionNet.forward_intermediates = forward_intermediates_tensor_final
    model_parity.perturb = perturb_and_calibrate
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
