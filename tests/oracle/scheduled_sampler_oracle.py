"""Python oracle for test_scheduled_batches: timm's ScheduledBatchSampler
(timm/data/scheduled_sampler.py) over a base sampler, batch by batch.

Usage: scheduled_sampler_oracle.py CASES_JSON
    CASES_JSON: a list of cases, each {"size": the base dataset's length,
    "base": "sequential" (SequentialSampler) or "distributed" (torch's
    DistributedSampler with "num_replicas", "rank", "base_seed", shuffled),
    "epochs": the epochs to iterate, and ScheduledBatchSampler's keyword
    arguments "batch_sizes", "choice_weights", "seed", "drop_last",
    "shuffle_schedule", "num_batches", "choice_schedule", "schedule_epochs",
    "schedule_spread", "schedule_random_mix" (null: None)}.
    Prints a JSON list, per case either {"error": "<type>: <message>"} when
    the constructor raises, or {"average_batch_size": float, "len": int,
    "batch_sizes": [...], "epochs": [{"epoch": e, "weights": [float64 ...]
    (choice_weights_for_epoch(e)), "batches": [[choice, [indices ...]], ...]}]}
    with the batches after set_epoch(e).
"""
import json
import sys

from torch.utils.data import DistributedSampler, SequentialSampler

from timm.data.scheduled_sampler import ScheduledBatchSampler


def base_sampler(case):
    data = range(case['size'])
    if case['base'] == 'sequential':
        return SequentialSampler(data)
    return DistributedSampler(
        data, num_replicas=case['num_replicas'], rank=case['rank'], shuffle=True, seed=case['base_seed'])


def run(case):
    try:
        sampler = ScheduledBatchSampler(
            base_sampler(case),
            batch_sizes=case['batch_sizes'],
            choice_weights=case.get('choice_weights'),
            seed=case.get('seed', 0),
            drop_last=case.get('drop_last', True),
            shuffle_schedule=case.get('shuffle_schedule', True),
            num_batches=case.get('num_batches'),
            choice_schedule=case.get('choice_schedule', 'constant'),
            schedule_epochs=case.get('schedule_epochs'),
            schedule_spread=case.get('schedule_spread', 0.65),
            schedule_random_mix=case.get('schedule_random_mix', 0.1),
        )
    except (ValueError, TypeError) as e:
        return {'error': f'{type(e).__name__}: {e}'}
    out = {
        'average_batch_size': sampler.average_batch_size,
        'len': len(sampler),
        'batch_sizes': list(sampler.batch_sizes),
        'epochs': [],
    }
    for epoch in case['epochs']:
        sampler.set_epoch(epoch)
        batches = []
        for batch in sampler:
            choices = {choice for _, choice in batch}
            assert len(choices) == 1
            batches.append([batch[0][1], [int(index) for index, _ in batch]])
        weights = [float(w) for w in sampler.choice_weights_for_epoch(epoch).tolist()]
        out['epochs'].append({'epoch': epoch, 'weights': weights, 'batches': batches})
    return out


def main():
    cases = json.loads(sys.argv[1])
    print(json.dumps([run(case) for case in cases]))


if __name__ == '__main__':
    main()
