"""Oracle for timm-cpp's scheduler tests.

  sched_oracle.py CASES_JSON
      CASES_JSON: a list of {"kwargs": create_scheduler_v2's keyword arguments
      (scheduler_kwargs plus updates_per_epoch), "lr": the optimizer's lr,
      optionally "metrics": the metric passed to step(epoch + 1, metric) after
      each epoch (metrics[epoch]; null, or past the end: none)}.
      Runs every schedule whole, as train.py does, on an SGD optimizer with two
      groups (no lr_scale, and lr_scale 0.5) and prints a list of
      {"num_epochs": n, "lrs": [[lr of each group] for t in 0 .. n (x updates)]}.
"""
import json
import sys
import warnings

import torch

from timm.scheduler import create_scheduler_v2


def run(kwargs, lr, metrics=None):
    groups = [{'params': [torch.nn.Parameter(torch.zeros(2))]},
              {'params': [torch.nn.Parameter(torch.zeros(2))], 'lr_scale': 0.5}]
    optimizer = torch.optim.SGD(groups, lr=lr)
    metrics = metrics or []
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)  # plateau is deprecated
        scheduler, num_epochs = create_scheduler_v2(optimizer, **kwargs)
    upe = 1 if kwargs['step_on_epochs'] else kwargs['updates_per_epoch']

    lrs = [[g['lr'] for g in optimizer.param_groups]]
    for t in range(1, num_epochs * upe + 1):
        if scheduler is None:  # 'none': the lr is left untouched
            lrs.append([g['lr'] for g in optimizer.param_groups])
            continue
        # train.py: step_update after every update, step(epoch + 1) after
        # every epoch; only one of them is effective.
        scheduler.step_update(num_updates=t)
        if t % upe == 0:
            epoch = t // upe - 1
            scheduler.step(t // upe, metrics[epoch] if epoch < len(metrics) else None)
        lrs.append([g['lr'] for g in optimizer.param_groups])
    return {'num_epochs': num_epochs, 'lrs': lrs}


def main():
    cases = json.loads(sys.argv[1])
    print(json.dumps([run(c['kwargs'], c['lr'], c.get('metrics')) for c in cases]))


if __name__ == '__main__':
    main()
