"""Python oracle for test_inception_v3: timm's Inception-V3 as the reference.

Modes and files as tests/oracle/model_parity.py describes, but for two things:
- timm's InceptionV3 takes no drop_path_rate (its constructor raises a
  TypeError), so the drop_path_rate=0.2 the shared oracle passes to record
  per-block rates is left out here; it has no drop path and its rates are the
  empty list;
- timm's init draws every conv weight with std 0.1 whatever its fan-in, so in
  eval mode (BN running statistics near (0, 1)) activations grow by orders of
  magnitude per layer (eval logits around 1e8 at 75 px); generate rescales
  each Conv2d / Linear weight after the shared perturbation to std
  sqrt(2 / fan_in) (a deterministic factor: the random streams are
  unchanged), so the comparisons are well conditioned;
- timm's group_matcher here is a function, which has no JSON form; info
  reports instead the rule set the C++ model returns, after checking through
  timm's own group_with_matcher that it puts every parameter in the same group,
  in the same order, as timm's function (an assertion error otherwise).
"""
import math
import sys

import timm
import torch
from timm.models._manipulate import group_with_matcher
from timm.models.inception_v3 import InceptionV3

import model_parity

_create_model = timm.create_model
_timm_group_matcher = InceptionV3.group_matcher

_MIXED = ["5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"]


_perturb = model_parity.perturb


def perturb_and_rescale(model, generator):
    _perturb(model, generator)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.mul_(math.sqrt(2.0 / fan_in) / 0.1)


def create_model_without_drop_path(*args, drop_path_rate=None, **kwargs):
    return _create_model(*args, **kwargs)


def rule_group_matcher(self, coarse=False):
    matcher = {
        "stem": [(r"^Conv2d_[12]", None), (r"^Conv2d_[34]", (1,))],
        "blocks": [(rf"^Mixed_{m}\.", (i,)) for i, m in enumerate(_MIXED)],
    }
    names = [(n, None) for n, _ in self.named_parameters()]
    ours = group_with_matcher(names, matcher)
    theirs = group_with_matcher(names, _timm_group_matcher(self, coarse=coarse))
    assert ours == theirs, "the rule group_matcher differs from timm's function"
    return matcher


def grad_keys(model):
    # The stem, one block of each kind (Mixed_5b: A, Mixed_6a: B, Mixed_6b: C,
    # Mixed_7a: D, Mixed_7b: E), the classifier, and every parameter under
    # 65536 values elsewhere (every BN).
    blocks = ("Conv2d_", "Mixed_5b.", "Mixed_6a.", "Mixed_6b.", "Mixed_7a.", "Mixed_7b.", "fc.")
    return [n for n, p in model.named_parameters() if n.startswith(blocks) or p.numel() < 65536]


def drop_path_rates(model):
    return []


if __name__ == "__main__":
    timm.create_model = create_model_without_drop_path
    InceptionV3.group_matcher = rule_group_matcher
    model_parity.perturb = perturb_and_rescale
    sys.exit(model_parity.main(grad_keys, drop_path_rates, __doc__))
