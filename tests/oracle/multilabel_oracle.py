"""Oracle for tests/core/test_multilabel.cpp: timm's MultiLabelClassificationEvaluator
and MultiLabelClassificationTask on inputs drawn here.

  multilabel_oracle.py OUT.safetensors
      writes the inputs (in.*) and timm's results (out.*) of every case.

Evaluator cases: in.<case>.b<i>.logits / .target (the batches, in order),
in.<case>.batches, in.<case>.threshold, in.<case>.max_samples (-1: none);
out.<case>.metrics = [loss, map, micro_f1, macro_f1, sample_f1] (float64),
out.<case>.count (samples scored), out.<case>.warned (the soft-target warning).
Task cases: in.task.* (a Linear(8, 5) model, input, targets); out.task.<case>.loss,
.output, .grad_weight, .grad_bias; out.err.<case> = 1 where timm raises.
"""
import logging
import sys

import torch
from torch import nn
from safetensors.torch import save_file

from timm.loss import BinaryCrossEntropy
from timm.task import MultiLabelClassificationTask
from timm.task.evaluator import MultiLabelClassificationEvaluator

NUM_CLASSES = 6


def tied_logits(rows, dtype=torch.float32):
    """Logits on a 0.5 grid (many ties, some exactly 0: sigmoid 0.5); column 5 constant (one tie group)."""
    logits = torch.round(torch.randn(rows, NUM_CLASSES) * 4) / 2
    logits[:, 5] = 0.25
    return logits.to(dtype)


def binary_targets(rows, dtype=torch.float32):
    target = (torch.rand(rows, NUM_CLASSES) < 0.4).to(dtype)
    target[:, 3] = 0  # a class without positives
    return target


def soft_targets(rows):
    target = torch.rand(rows, NUM_CLASSES)
    target[target < 0.2] = 0
    target[target > 0.8] = 1
    target[0, :3] = 0.5  # binarised to 1: >= 0.5
    target[:, 3] = 0.3  # no positives once binarised
    return target


def evaluator_case(out, name, batches, threshold=0.5, max_samples=None):
    evaluator = MultiLabelClassificationEvaluator(threshold=threshold, max_samples=max_samples)
    for i, (logits, target) in enumerate(batches):
        out[f'in.{name}.b{i}.logits'] = logits.clone()
        out[f'in.{name}.b{i}.target'] = target.clone()
        evaluator.update(logits, target)
    out[f'in.{name}.batches'] = torch.tensor(len(batches))
    out[f'in.{name}.threshold'] = torch.tensor(threshold, dtype=torch.float64)
    out[f'in.{name}.max_samples'] = torch.tensor(-1 if max_samples is None else max_samples)
    metrics = evaluator.compute()
    out[f'out.{name}.metrics'] = torch.tensor([metrics[k] for k in evaluator.metric_names], dtype=torch.float64)
    out[f'out.{name}.count'] = evaluator.counts[0].clone()
    out[f'out.{name}.warned'] = torch.tensor(int(evaluator._warned_soft_targets))


def evaluators(out):
    main = [
        (tied_logits(7), binary_targets(7)),
        (tied_logits(0), binary_targets(0)),
        (tied_logits(5), binary_targets(5, torch.int64)),  # integer targets: converted to float
        (tied_logits(9, torch.float64), binary_targets(9)),  # float64 logits: converted to float32
    ]
    evaluator_case(out, 'main', main)
    evaluator_case(out, 'thresh', main, threshold=0.3)
    evaluator_case(out, 'soft', [(tied_logits(8), soft_targets(8)), (tied_logits(8), soft_targets(8))])
    evaluator_case(out, 'max', [(tied_logits(6), binary_targets(6)) for _ in range(4)], max_samples=15)
    # Untied random logits, more rows: a generic ranking.
    evaluator_case(out, 'wide', [(torch.randn(40, NUM_CLASSES) * 3, binary_targets(40)) for _ in range(3)],
                   threshold=0.7)
    evaluator_case(out, 'empty', [])


def raises(fn):
    try:
        fn()
    except ValueError:
        return torch.tensor(1)
    return torch.tensor(0)


def tasks(out):
    model = nn.Linear(8, 5)
    with torch.no_grad():
        model.weight.copy_(torch.randn(5, 8))
        model.bias.copy_(torch.randn(5))
    x = torch.randn(4, 8)
    target = (torch.rand(4, 5) < 0.5).float()
    soft = torch.rand(4, 5)
    out['in.task.weight'], out['in.task.bias'] = model.weight.detach().clone(), model.bias.detach().clone()
    out['in.task.x'], out['in.task.target'], out['in.task.soft'] = x, target, soft
    cases = {
        'explicit': (dict(criterion=BinaryCrossEntropy(smoothing=0.1)), target),
        'default': (dict(criterion_kwargs=dict(smoothing=0.1)), target),
        'mixup': (dict(criterion_kwargs=dict(smoothing=0.1, soft_targets=True)), soft),
        'options': (dict(criterion_kwargs=dict(smoothing=0.2, bce_target_thresh=0.3, pos_weight=2.0, bce_sum=True)),
                    soft),
    }
    for name, (kwargs, t) in cases.items():
        task = MultiLabelClassificationTask(model, verbose=False, **kwargs)
        model.zero_grad()
        result = task(x, t)
        result['loss'].backward()
        out[f'out.task.{name}.loss'] = result['loss'].detach()
        out[f'out.task.{name}.output'] = result['output'].detach()
        out[f'out.task.{name}.grad_weight'] = model.weight.grad.clone()
        out[f'out.task.{name}.grad_bias'] = model.bias.grad.clone()
    task = MultiLabelClassificationTask(model, verbose=False)
    out['out.err.threshold_0'] = raises(lambda: MultiLabelClassificationTask(model, threshold=0.0, verbose=False))
    out['out.err.threshold_1'] = raises(lambda: MultiLabelClassificationTask(model, threshold=1.0, verbose=False))
    out['out.err.eval_threshold_0'] = raises(lambda: MultiLabelClassificationEvaluator(threshold=0.0))
    out['out.err.eval_threshold_1'] = raises(lambda: MultiLabelClassificationEvaluator(threshold=1.0))
    out['out.err.target_1d'] = raises(lambda: task(x, target[:, 0]))
    out['out.err.target_int'] = raises(lambda: task(x, target.long()))
    out['out.err.eval_shape'] = raises(lambda: MultiLabelClassificationEvaluator().update(target, target[:, :3]))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)  # the soft-target warning: recorded as out.<case>.warned
    out = {}
    evaluators(out)
    tasks(out)
    save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[1])


if __name__ == '__main__':
    main()
