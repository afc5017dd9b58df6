"""Oracle for timm-cpp's optimizer tests (and lookahead's): timm's parameter groups and torch's
optimizer steps on a small model that tests/support/optim_parity.hpp mirrors.

  optim_oracle.py groups WEIGHT_DECAY...
      -> JSON, per weight decay: [{"weight_decay": wd, "names": [...]}, ...]
  optim_oracle.py steps OUT.json CASES_JSON
      CASES_JSON: a list of {"opt", "lr", "weight_decay", "momentum",
      "opt_eps" (or null), "opt_betas" (or null), "opt_kwargs": ["k=v", ...],
      "steps", "seed"}, train.py's flags; optionally "layer_decay",
      "layer_decay_min_scale", "layer_decay_no_opt_scale" (Small's
      group_matcher then assigns the layers).
      -> writes, per case, the initial parameters, the gradients of every
         step, the lr factor of every step, the final parameters, the groups'
         lr_scale / weight_decay / parameter names and the optimizer state
         per parameter name ({key: number or flat list}) to OUT.json
      A case with the keys "model" and "loss" (optim_parity.hpp's
      StateCase runs) is run on "model": "small" (Small) or "big" (Small
      with parameters large enough for Adafactor's factored moments), with
      "loss": false random gradients as above, or true the gradients of
      loss() (below) with create_graph, as train.py's backward for second
      order optimizers (the coefficients of each step are written out); it
      writes instead of the groups "state" (per parameter name, the base
      optimizer's state[p] as flat lists, spaces in keys replaced by "_")
      and "group_state" (per group, its tensors such as LAMB's step).
  optim_oracle.py names
      -> JSON {"all": timm.optim.list_optimizers(), "external": the names
         whose class lives in apex or bitsandbytes (a string in timm's registry)}
  optim_oracle.py layer_groups MODEL WEIGHT_DECAY LAYER_DECAY MIN_SCALE
      -> JSON {"layers": {name: layer id} (group_parameters of the model's
         group_matcher(coarse=False)), "groups": [{"names", "lr_scale",
         "weight_decay"}, ...] (param_groups_layer_decay), "lrs": the groups'
         lr after create_optimizer_v2('adamw', lr=0.1, layer decay) and
         create_scheduler_v2('cosine', num_epochs=10, warmup_epochs=2),
         then after scheduler.step(e) for e in 1..4}
"""
import ast
import json
import sys

import torch
from torch import nn

from timm.optim import create_optimizer_v2
from timm.optim._param_groups import param_groups_weight_decay


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(2, 2))
        self.weight = nn.Parameter(torch.zeros(2, 3))


class Proj(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(2, 3))  # 2-D, but named ".bias"


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 3, 4))  # no_weight_decay()
        self.scale = nn.Parameter(torch.ones(4))  # 1-D, not a bias
        self.frozen = nn.Parameter(torch.zeros(3, 3), requires_grad=False)
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.blk0 = Block()
        self.blk1 = Block()
        self.proj = Proj()
        self.fc = nn.Linear(4, 5)

    def no_weight_decay(self):
        return {'pos_embed', 'blk?.gamma'}

    def group_matcher(self, coarse=False):
        # stem, one layer per block, "proj" joined to the last block
        # (MATCH_PREV_GROUP), "fc" unmatched (the last layer).
        return dict(
            stem=r'^pos_embed|scale|frozen|conv|bn',
            blocks=[(r'^blk(\d+)', None), (r'^proj', (99999,))],
        )


# lr of every group before step k is lr * LR_FACTORS[k]; "scale" has no
# gradient on the steps in NO_GRAD_STEPS (optimizers skip it).
LR_FACTORS = [1.0, 0.9, 1.1, 0.5, 0.5, 2.0, 1.0, 0.3, 0.7, 1.0, 1.0, 0.8]
NO_GRAD_STEPS = {3, 6}


def flat(t):
    return t.detach().reshape(-1).tolist()


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


def groups(wd):
    model = Small()
    names = {id(p): n for n, p in model.named_parameters()}
    groups = param_groups_weight_decay(model, wd, no_weight_decay_list=model.no_weight_decay())
    return [{'weight_decay': g['weight_decay'], 'names': [names[id(p)] for p in g['params']]} for g in groups]


def cmd_groups(argv):
    print(json.dumps([groups(float(wd)) for wd in argv]))


def parse_kwargs(tokens):
    # timm.utils.ParseKwargs
    kw = {}
    for token in tokens or []:
        key, value = token.split('=')
        try:
            kw[key] = ast.literal_eval(value)
        except ValueError:
            kw[key] = str(value)
    return kw


def steps(case):
    torch.manual_seed(case['seed'])
    state_case = 'model' in case  # a StateCase: flat state lists and group_state, no group_info
    model = Big() if case.get('model') == 'big' else Small()
    g = torch.Generator().manual_seed(case['seed'])
    with torch.no_grad():
        for _, param in model.named_parameters():
            param.copy_(torch.randn(param.shape, generator=g))
    initial = {n: flat(q) for n, q in model.named_parameters()}

    # As train.py: create_optimizer_v2(model, **optimizer_kwargs(args), **args.opt_kwargs).
    opt_kwargs = dict(opt=case['opt'], lr=case['lr'], weight_decay=case['weight_decay'], momentum=case['momentum'])
    if case['opt_eps'] is not None:
        opt_kwargs['eps'] = case['opt_eps']
    if case['opt_betas'] is not None:
        opt_kwargs['betas'] = case['opt_betas']
    # optimizer_kwargs(args): the layer-decay flags when not None.
    for key in ('layer_decay', 'layer_decay_min_scale', 'layer_decay_no_opt_scale'):
        if case.get(key) is not None:
            opt_kwargs[key] = case[key]
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
        if case.get('loss'):
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

    out = {
        'names': [n for n, _ in model.named_parameters()],
        'groups': [len(gr['params']) for gr in optimizer.param_groups],
        'describe': describe,
        'lr_factors': LR_FACTORS[:case['steps']],
        'initial': initial,
        'grads': grads,
        'final': {n: flat(q) for n, q in model.named_parameters()},
    }
    if state_case:
        out['state'] = state_lists(model, optimizer)
        out['group_state'] = [{k: as_list(v) for k, v in gr.items() if k == 'step'}
                              for gr in base_of(optimizer).param_groups]
    else:
        out['group_info'] = group_info(model, optimizer)
        out['state'] = state_of(model, optimizer)
    return out


def state_lists(model, optimizer):
    base = base_of(optimizer)
    state = {}
    for n, q in model.named_parameters():
        values = {}
        for key, v in base.state.get(q, {}).items():
            v = as_list(v)
            if v is not None:
                values[key.replace(' ', '_')] = v
        state[n] = values
    return state


def group_info(model, optimizer):
    names = {id(p): n for n, p in model.named_parameters()}
    return [{'names': [names[id(p)] for p in gr['params']], 'lr_scale': gr.get('lr_scale', 1.0),
             'weight_decay': gr['weight_decay']} for gr in optimizer.param_groups]


def state_of(model, optimizer):
    out = {}
    for n, q in model.named_parameters():
        if q not in optimizer.state:
            continue
        entry = {}
        for key, value in optimizer.state[q].items():
            if torch.is_tensor(value):
                entry[key] = value.item() if value.dim() == 0 else flat(value)
            elif isinstance(value, (int, float)):
                entry[key] = float(value)
        out[n] = entry
    return out


def cmd_layer_groups(argv):
    import timm
    from timm.models import group_parameters
    from timm.optim._param_groups import param_groups_layer_decay
    name, wd, ld, min_scale = argv[0], float(argv[1]), float(argv[2]), float(argv[3])
    model = timm.create_model(name)
    names = {id(p): n for n, p in model.named_parameters()}
    layers = group_parameters(model, model.group_matcher(coarse=False), reverse=True)
    no_wd = getattr(model, 'no_weight_decay', lambda: set())()
    groups = param_groups_layer_decay(model, weight_decay=wd, layer_decay=ld, min_scale=min_scale,
                                      no_weight_decay_list=no_wd)
    from timm.scheduler import create_scheduler_v2
    optimizer = create_optimizer_v2(model, 'adamw', lr=0.1, weight_decay=wd, layer_decay=ld,
                                    layer_decay_min_scale=min_scale)
    scheduler, _ = create_scheduler_v2(optimizer, 'cosine', num_epochs=10, warmup_epochs=2, warmup_lr=1e-5,
                                       min_lr=0.0)
    lrs = [[g['lr'] for g in optimizer.param_groups]]
    for epoch in range(1, 5):
        scheduler.step(epoch)
        lrs.append([g['lr'] for g in optimizer.param_groups])
    print(json.dumps({
        'lrs': lrs,
        'layers': layers,
        'groups': [{'names': [names[id(p)] for p in g['params']], 'lr_scale': g['lr_scale'],
                    'weight_decay': g['weight_decay']} for g in groups],
    }))


def cmd_steps(argv):
    out, cases = argv[0], json.loads(argv[1])
    with open(out, 'w') as f:
        json.dump([steps(c) for c in cases], f)


def cmd_names(argv):
    from timm.optim import get_optimizer_info, list_optimizers
    names = list_optimizers()
    external = [n for n in names if isinstance(get_optimizer_info(n).opt_class, str)]
    print(json.dumps({'all': names, 'external': external}))


def main():
    cmd, argv = sys.argv[1], sys.argv[2:]
    commands = {'groups': cmd_groups, 'steps': cmd_steps, 'layer_groups': cmd_layer_groups, 'names': cmd_names}
    commands[cmd](argv)


if __name__ == '__main__':
    main()
