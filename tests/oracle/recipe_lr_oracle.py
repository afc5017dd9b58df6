"""Oracle for tests/e2e/test_doc_recipes.cpp: the lr of each epoch that
timm's train.py would use for a command line.

  recipe_lr_oracle.py ARGS_JSON EPOCHS
      ARGS_JSON: the command line's arguments (a JSON list of strings).
      Prints a JSON list: the mean lr over param groups during epochs
      0 .. EPOCHS-1, as train.py writes it to summary.csv.

The command line's scheduler flags are read into a namespace that holds only
what the command line sets; timm's own scheduler_kwargs() supplies the
defaults for the rest, then create_scheduler_v2() builds the schedule.
"""
import argparse
import json
import sys

import torch

from timm.scheduler import create_scheduler_v2
from timm.scheduler.scheduler_factory import scheduler_kwargs

# train.py's scheduler flags and their types.
FLAGS = {
    'sched': str, 'epochs': int, 'decay_epochs': float, 'decay_rate': float, 'warmup_lr': float,
    'warmup_epochs': int, 'min_lr': float, 'cooldown_epochs': int, 'lr': float, 'lr_cycle_mul': float,
    'lr_cycle_decay': float, 'lr_cycle_limit': int, 'lr_k_decay': float, 'patience_epochs': int,
}


def parse(argv):
    ns = argparse.Namespace()
    for i, arg in enumerate(argv):
        name = arg.lstrip('-').replace('-', '_')
        if arg.startswith('--') and name in FLAGS:
            setattr(ns, name, FLAGS[name](argv[i + 1]))
    return ns


def main():
    argv = json.loads(sys.argv[1])
    epochs = int(sys.argv[2])
    args = parse(argv)
    kwargs = scheduler_kwargs(args, decreasing_metric=False)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=args.lr)
    scheduler, _ = create_scheduler_v2(optimizer, **kwargs, updates_per_epoch=1)
    lrs = []
    for epoch in range(epochs):
        lrs.append(sum(g['lr'] for g in optimizer.param_groups) / len(optimizer.param_groups))
        scheduler.step(epoch + 1, None)
    print(json.dumps(lrs))


if __name__ == '__main__':
    main()
