"""Oracle for the optimizer tests of rmsprop, lamb, lars, adafactor, adahessian,
madgrad and lookahead: timm's create_optimizer_v2 and steps, as
optim_oracle.py, plus the optimizer state and two more ways to run.

  optim_oracle_more.py steps OUT.json CASES_JSON
      CASES_JSON: a list of optim_oracle.py's cases, each with two more keys:
        "model": "small" (optim_oracle.Small) or "big" (Small with parameters
                 large enough for Adafactor's factored moments),
        "loss":  false: random gradients, as optim_oracle.py;
                 true: the gradients of loss() (below) with create_graph, as
                 train.py's backward for second order optimizers; the
                 coefficients of each step are written out.
      -> writes, per case, what optim_oracle.py writes plus "state" (per
         parameter name, torch's optimizer.state[p] as flat lists, spaces in
         keys replaced by "_") and "group_state" (per group, its tensors
         such as LAMB's step).
"""
import json
import sys

import torch
from torch import nn

from optim_oracle import LR_FACTORS, NO_GRAD_STEPS, Small, flat, parse_kwargs
from timm.optim import create_optimizer_v2


class Big(Small):
    def __init__(self):
        super().__init__()
        self.wide = nn.Parameter(torch.zeros(20, 18))        # factored on dims 0, 1
        self.kernel = nn.Parameter(torch.zeros(20, 17, 3, 3))  # a conv weight: dims 0, 1
        self.tall = nn.Parameter(torch.zeros(3, 19, 17))     # trailing dims 1, 2


def loss(model, coeffs):
    """sum(a * tanh(p)) + 0.5 * (0.1 * sum(b * p))^2 over the parameters in
    coeffs: second derivatives on and off the diagonal."""
    total = torch.zeros(())
    s = torch.zeros(())
    for n, q in model.named_parameters():
        if n not in coeffs:
            continue
        a, b = coeffs[n]
        total = total + (a * torch.tanh(q)).sum()
        s = s + (b * q).sum()
    s = s * 0.1
    return total + 0.5 * s * s


def as_list(v):
    if torch.is_tensor(v):
        return flat(v) if v.dim() > 0 else [v.item()]
    if isinstance(v, (int, float)):
        return [float(v)]
    return None


def base_of(optimizer):
    return getattr(optimizer, '_base_optimizer', optimizer)


def steps(case):
    torch.manual_seed(case['seed'])
    model = Big() if case['model'] == 'big' else Small()
    g = torch.Generator().manual_seed(case['seed'])
    with torch.no_grad():
        for _, param in model.named_parameters():
            param.copy_(torch.randn(param.shape, generator=g))
    initial = {n: flat(q) for n, q in model.named_parameters()}

    opt_kwargs = dict(opt=case['opt'], lr=case['lr'], weight_decay=case['weight_decay'], momentum=case['momentum'])
    if case['opt_eps'] is not None:
        opt_kwargs['eps'] = case['opt_eps']
    if case['opt_betas'] is not None:
        opt_kwargs['betas'] = case['opt_betas']
    optimizer = create_optimizer_v2(model, **opt_kwargs, **parse_kwargs(case['opt_kwargs']))
    defaults = dict(optimizer.defaults)
    defaults['weight_decay'] = case['weight_decay']
    defaults = ', '.join([f'{k}: {v}' for k, v in defaults.items()])
    describe = f'{type(optimizer).__name__} ({case["opt"]}) optimizer: {defaults}'
    second_order = getattr(optimizer, 'is_second_order', False)

    grads = []
    for k in range(case['steps']):
        for group in optimizer.param_groups:
            group['lr'] = case['lr'] * LR_FACTORS[k]
        step_grads = {}
        if case['loss']:
            coeffs = {}
            for n, q in model.named_parameters():
                if not q.requires_grad:
                    continue
                a = torch.randn(q.shape, generator=g)
                b = torch.randn(q.shape, generator=g)
                if n == 'scale' and k in NO_GRAD_STEPS:
                    continue
                coeffs[n] = (a, b)
                step_grads[n] = [flat(a), flat(b)]
            optimizer.zero_grad()
            loss(model, coeffs).backward(create_graph=second_order)
        else:
            for n, q in model.named_parameters():
                if not q.requires_grad:
                    continue
                grad = torch.randn(q.shape, generator=g)
                if n == 'scale' and k in NO_GRAD_STEPS:
                    q.grad = None
                    step_grads[n] = None
                else:
                    q.grad = grad
                    step_grads[n] = flat(grad)
        optimizer.step()
        grads.append(step_grads)

    base = base_of(optimizer)
    state = {}
    for n, q in model.named_parameters():
        values = {}
        for key, v in base.state.get(q, {}).items():
            v = as_list(v)
            if v is not None:
                values[key.replace(' ', '_')] = v
        state[n] = values
    group_state = [{k: as_list(v) for k, v in gr.items() if k == 'step'} for gr in base.param_groups]

    return {
        'names': [n for n, _ in model.named_parameters()],
        'groups': [len(gr['params']) for gr in optimizer.param_groups],
        'describe': describe,
        'lr_factors': LR_FACTORS[:case['steps']],
        'initial': initial,
        'grads': grads,
        'final': {n: flat(q) for n, q in model.named_parameters()},
        'state': state,
        'group_state': group_state,
    }


def cmd_steps(argv):
    out, cases = argv[0], json.loads(argv[1])
    with open(out, 'w') as f:
        json.dump([steps(c) for c in cases], f)


def main():
    cmd, argv = sys.argv[1], sys.argv[2:]
    {'steps': cmd_steps}[cmd](argv)


if __name__ == '__main__':
    main()
