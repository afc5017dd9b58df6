"""Python oracle for test_naflex_erasing: timm's PatchRandomErasing
(timm/data/naflex_random_erasing.py) geometry, with every random draw recorded.

Usage: naflex_erasing_oracle.py CASES_JSON
    CASES_JSON: a list of cases {"spatial": "region" | "patch", "p", "min_count", "max_count",
    "min_area", "max_area", "grid": [H, W] (the valid patches, row-major), "pad": padding
    patches after them, "trials", "seed"}. Prints a JSON list, per case {"repr": repr(eraser),
    "trials": [{"draws": [...], "sets": [[indices...], ...]}]}: each trial's draws in order
    ("r:<random()>", "i:<lo>:<hi>:<value>", "p:<n>:<v0,v1,...>" for torch.randperm) and the
    index sets each erasure wrote, in order (a patch-mode set in timm's order).
"""
import json
import sys

import torch

import timm.data.naflex_random_erasing as NRE
from aug_oracle import RecordingRandom  # Python's random draws, recorded


class RecordingPatches:
    """Stands in for one sample's patches: records the indices each erasure writes."""
    device = torch.device('cpu')

    def __init__(self):
        self.sets = []

    def __setitem__(self, key, value):
        if key.dtype == torch.bool:
            self.sets.append(key.nonzero().flatten().tolist())
        else:
            self.sets.append(key.tolist())


def run(case):
    eraser = NRE.PatchRandomErasing(
        erase_prob=case['p'], min_count=case['min_count'], max_count=case['max_count'],
        min_area=case.get('min_area', 0.02), max_area=case.get('max_area', 1 / 3), mode='const',
        spatial_mode=case['spatial'], device='cpu')
    h, w = case['grid']
    pad = case['pad']
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    coord = torch.cat([torch.stack([ys.flatten(), xs.flatten()], 1), torch.zeros(pad, 2, dtype=torch.long)])
    valid = torch.cat([torch.ones(h * w, dtype=torch.bool), torch.zeros(pad, dtype=torch.bool)])
    rec = RecordingRandom(case['seed'])
    torch.manual_seed(case['seed'])
    real_randperm = torch.randperm

    def recording_randperm(n, **kwargs):
        perm = real_randperm(n, **kwargs)
        rec.draws.append(f'p:{n}:' + ','.join(str(v) for v in perm.tolist()))
        return perm

    saved = NRE.random
    NRE.random = rec
    NRE.torch.randperm = recording_randperm
    trials = []
    try:
        for _ in range(case['trials']):
            rec.draws = []
            patches = RecordingPatches()
            if case['spatial'] == 'region':
                eraser._erase_region(patches, coord, valid, (16, 3))
            else:
                eraser._erase_patches(patches, coord, valid, (16, 3))
            trials.append({'draws': rec.draws, 'sets': patches.sets})
    finally:
        NRE.random = saved
        NRE.torch.randperm = real_randperm
    return {'repr': repr(eraser), 'trials': trials}


if __name__ == '__main__':
    print(json.dumps([run(c) for c in json.loads(sys.argv[1])]))
