"""Test oracle for timm's AutoAugment / RandAugment / AugMix and RandomErasing:
timm (timm/data/auto_augment.py, random_erasing.py) and PIL produce the values
the C++ tests compare against.

Usage: aug_oracle.py <command> <outdir>
  ops      every PIL op timm's augmentations use, on Fashion-MNIST images, synthetic
           images and real photographs, over a sweep of arguments; manifest.txt
  levels   timm's AugmentOp (level -> argument mapping, then the op) for every op
           name at a sweep of magnitudes, both signs; manifest.txt
  parse    timm's parsers and create_transform for a list of --aa strings: reprs
           and each op's settings; parse.txt
  augmix   AugMixAugment's mix of given chains with given weights; manifest.txt
  erasing  timm's RandomErasing geometry with the random draws recorded; erasing.txt
  jsd      timm's JsdCrossEntropy on random logits: loss and gradient; manifest.txt
  basic    timm's create_transform reprs with --train-crop-mode rkrc / rkrr,
           --color-jitter-prob, --grayscale-prob, --gaussian-blur-prob
           (basic_reprs.txt); with <outdir>/basic_cases.txt (written by the
           C++ test) timm's rkrc / rkrr crops driven by the recorded random
           draws, torchvision's gaussian_blur at given sigmas and
           RandomGrayscale(p=1) on the given images; basic_results.txt

Images are written raw (H x W x C uint8, row-major).
"""
import glob
import math
import os
import random
import sys

import numpy as np
from PIL import Image, ImageFilter, ImageOps

from data_oracle import fmnist_images, from_pil, to_pil

RESAMPLE = {'nearest': Image.Resampling.NEAREST, 'bilinear': Image.Resampling.BILINEAR,
            'bicubic': Image.Resampling.BICUBIC}
PHOTO_GLOBS = [
    '/usr/share/wallpapers/*/contents/images/*.jpg',
    '/usr/share/wallpapers/*/contents/images/*.png',
    '/root/.rustup/toolchains/*/share/doc/rust/html/embedded-book/assets/*.jp*g',
]


def photos(limit=2):
    """Crops (no resampling) of real photographs: Debian's wallpapers when
    installed, else the JPEG photos shipped in the Rust toolchain's docs."""
    seen, out = set(), {}
    for pattern in PHOTO_GLOBS:
        for path in sorted(glob.glob(pattern)):
            base = os.path.basename(path)
            if base in seen or len(out) >= limit:
                continue
            seen.add(base)
            im = Image.open(path).convert('RGB')
            w, h = im.size
            cw, ch = min(w, 200), min(h, 160)
            left, top = (w - cw) // 2, (h - ch) // 2
            out[f'photo{len(out)}'] = (from_pil(im.crop((left, top, left + cw, top + ch))), path)
    return out


def images():
    rng = np.random.RandomState(3)
    yy, xx = np.mgrid[0:45, 0:61].astype(np.float64)
    smooth = np.stack([127.5 + 127.5 * np.sin(xx / 7.0) * np.cos(yy / 11.0), 40 + 150.0 * xx / 60.0,
                       255.0 * (yy / 44.0) ** 2], axis=-1)
    imgs = {
        'noise_rgb': rng.randint(0, 256, (37, 53, 3)).astype(np.uint8),
        'smooth_rgb': np.clip(np.round(smooth), 0, 255).astype(np.uint8),
        'square_rgb': rng.randint(20, 230, (24, 24, 3)).astype(np.uint8),
    }
    for i, img in enumerate(fmnist_images('train', 2)):
        imgs[f'fmnist{i}'] = img[..., None].copy()
    for name, (a, _) in photos().items():
        imgs[name] = a
    return imgs


def fill_for(a):
    return (124, 116, 104) if a.shape[2] == 3 else 121


def op_cases():
    """(op, argument, resample) triples; resample only matters for geometry."""
    cases = []
    for r in RESAMPLE:
        cases += [('rotate', d, r) for d in (-30.0, -13.5, 0.0, 7.3, 27.0, 45.0, 90.0, 180.0, -90.0)]
        cases += [('shear_x', f, r) for f in (-0.3, -0.15, 0.05, 0.27)]
        cases += [('shear_y', f, r) for f in (-0.27, 0.1, 0.3)]
        cases += [('translate_x_abs', p, r) for p in (-100.0, -12.6, 7.5, 45.0)]
        cases += [('translate_y_abs', p, r) for p in (-9.3, 20.0)]
        cases += [('translate_x_rel', p, r) for p in (-0.45, 0.13)]
        cases += [('translate_y_rel', p, r) for p in (-0.2, 0.45)]
    cases += [('auto_contrast', 0, '-'), ('equalize', 0, '-'), ('invert', 0, '-'), ('grayscale', 0, '-')]
    cases += [('posterize', b, '-') for b in range(0, 9)]
    cases += [('solarize', t, '-') for t in (0, 64, 128, 200, 256)]
    cases += [('solarize_add', a, '-') for a in (0, 33, 110)]
    for op in ('color', 'contrast', 'brightness', 'sharpness'):
        cases += [(op, f, '-') for f in (0.1, 0.5, 1.0, 1.37, 1.9, 2.5)]
    cases += [('gaussian_blur', r, '-') for r in (0.1, 0.5, 1.0, 1.7, 2.0, 4.5)]
    return cases


def apply_op(img, op, arg, resample):
    """timm's op functions, called as AugmentOp calls them."""
    from timm.data import auto_augment as A
    kw = dict(fillcolor=fill_for(from_pil(img)), resample=RESAMPLE.get(resample))
    if op == 'posterize' and arg == 0:
        # Pillow >= 10.3 refuses 0 bits; the table older Pillow built (all black).
        return img.point([i & ~255 for i in range(256)] * len(img.getbands()))
    if op == 'grayscale':
        return ImageOps.grayscale(img)
    if op == 'gaussian_blur':
        return img.filter(ImageFilter.GaussianBlur(radius=arg))
    fn = {'auto_contrast': A.auto_contrast, 'equalize': A.equalize, 'invert': A.invert,
          'posterize': A.posterize, 'solarize': A.solarize, 'solarize_add': A.solarize_add,
          'color': A.color, 'contrast': A.contrast, 'brightness': A.brightness, 'sharpness': A.sharpness,
          'rotate': A.rotate, 'shear_x': A.shear_x, 'shear_y': A.shear_y, 'translate_x_abs': A.translate_x_abs,
          'translate_y_abs': A.translate_y_abs, 'translate_x_rel': A.translate_x_rel,
          'translate_y_rel': A.translate_y_rel}[op]
    if op in ('auto_contrast', 'equalize', 'invert'):
        return fn(img)
    if op in ('posterize', 'solarize', 'solarize_add', 'color', 'contrast', 'brightness', 'sharpness'):
        return fn(img, arg)
    return fn(img, arg, **kw)


def cmd_ops(out):
    lines = []
    for name, a in images().items():
        a.tofile(os.path.join(out, f'{name}.in'))
        h, w, c = a.shape
        for k, (op, arg, resample) in enumerate(op_cases()):
            res = from_pil(apply_op(to_pil(a), op, arg, resample))
            tag = f'{name}_{k}'
            res.tofile(os.path.join(out, tag + '.out'))
            lines.append(f'{name} {h} {w} {c} {op} {arg!r} {resample} {res.shape[2]} {tag}.out')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    with open(os.path.join(out, 'photos.txt'), 'w') as f:
        for name, (_, path) in photos().items():
            f.write(f'{name} {path}\n')


LEVEL_MAGNITUDES = (0, 1, 2.5, 4.7, 5, 7.3, 9, 10)


def level_hparams(a, resample):
    return dict(translate_const=max(1, int(min(a.shape[:2]) * 0.45)), img_mean=fill_for(a) if a.shape[2] == 3 else
                (121,), interpolation=RESAMPLE[resample], translate_pct=0.45)


def run_op(name, magnitude, negate, a, resample):
    """timm's AugmentOp(name, p=1, m) with the sign forced: random.random()
    decides _randomly_negate (> 0.5 negates)."""
    from timm.data import auto_augment as A
    op = A.AugmentOp(name, prob=1.0, magnitude=magnitude, hparams=level_hparams(a, resample))
    saved = A.random.random
    A.random.random = lambda: 0.9 if negate else 0.1
    try:
        m = max(0., min(magnitude, A._LEVEL_DENOM))
        args = op.level_fn(m, op.hparams) if op.level_fn is not None else ()
        try:
            res = from_pil(op(to_pil(a)))
            status = 'ok'
        except ValueError:
            # Pillow >= 10.3 refuses posterize(0); older Pillow made black.
            res = np.zeros_like(a)
            status = 'pil_raises'
    finally:
        A.random.random = saved
    return args, res, status


def cmd_levels(out):
    from timm.data import auto_augment as A
    imgs = images()
    lines = []
    for iname in ('noise_rgb', 'fmnist0', 'photo0', 'square_rgb'):
        if iname not in imgs:
            continue
        a = imgs[iname]
        a.tofile(os.path.join(out, f'{iname}.in'))
        h, w, c = a.shape
        for name in A.LEVEL_TO_ARG:
            if name == 'GaussianBlurRand':
                continue  # draws its radius inside the op; its level argument is checked in 'parse'
            signed = name in ('Rotate', 'ShearX', 'ShearY', 'TranslateX', 'TranslateY', 'TranslateXRel',
                              'TranslateYRel') or name.endswith('Increasing') and not name.startswith(('Posterize',
                                                                                                        'Solarize'))
            geometric = name in ('Rotate', 'ShearX', 'ShearY', 'TranslateX', 'TranslateY', 'TranslateXRel',
                                 'TranslateYRel')
            for m in LEVEL_MAGNITUDES:
                for negate in ((False, True) if signed else (False,)):
                    for resample in (('bilinear', 'bicubic') if geometric else ('bilinear',)):
                        args, res, status = run_op(name, m, negate, a, resample)
                        tag = f'{iname}_{len(lines)}'
                        res.tofile(os.path.join(out, tag + '.out'))
                        arg_text = ','.join(repr(float(x)) for x in args) or '-'
                        lines.append(f'{iname} {h} {w} {c} {name} {m!r} {int(negate)} {resample} {arg_text} '
                                     f'{status} {tag}.out')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


PARSE_CONFIGS = [
    # (--aa, H, W, interpolation, mean)
    ('rand-m9-mstd0.5-inc1', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('rand-m9-mstd0.5', 192, 160, 'bilinear', (0.5, 0.5, 0.5)),
    ('rand-m7-n3-mstd1.0', 224, 224, 'random', (0.485, 0.456, 0.406)),
    ('rand-m10-n1-p0.3', 96, 128, 'bicubic', (0.485, 0.456, 0.406)),
    ('rand-mstd101', 224, 224, 'bilinear', (0.485, 0.456, 0.406)),
    ('rand-m12-mmax15-inc1', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('rand-tweights', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('rand-m9-t3a', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('rand-m5-t3aw-n3-inc1', 160, 160, 'bilinear', (0.485, 0.456, 0.406)),
    ('rand', 224, 224, 'bilinear', (0.485, 0.456, 0.406)),
    ('rand-inc0-m2-mmax0', 224, 224, 'nearest', (0.485, 0.456, 0.406)),
    ('rand-m9-tweights-n2-x', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('original', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('originalr', 224, 224, 'bilinear', (0.485, 0.456, 0.406)),
    ('v0', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('v0r', 224, 224, 'random', (0.485, 0.456, 0.406)),
    ('3a', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('original-mstd0.5', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('augmix-m5-w4-d2', 224, 224, 'bilinear', (0.485, 0.456, 0.406)),
    ('augmix', 224, 224, 'bicubic', (0.485, 0.456, 0.406)),
    ('augmix-m5-w4-d2-a0.5-b1-mstd0.8', 256, 192, 'random', (0.5, 0.4, 0.3)),
]
BAD_CONFIGS = ['rand-w0', 'rand-m9-q3', 'rand-m9.5', 'v1', 'augmix-q3', 'original-m3', 'randx-m9', 'augmix-m5-w2.5']


def hparams_text(hp):
    interp = hp.get('interpolation')
    interp = {v: k for k, v in RESAMPLE.items()}.get(interp, 'random') if interp is not None else 'random'
    return (f"tc={hp.get('translate_const')} mean={','.join(str(int(x)) for x in hp['img_mean'])} interp={interp} "
            f"tpct={hp.get('translate_pct', 0.45)!r} mstd={hp.get('magnitude_std', 0)!r} "
            f"mmax={hp.get('magnitude_max', None)!r}")


def describe(t):
    """Every setting of the parsed transform, one line each."""
    from timm.data import auto_augment as A
    lines = [type(t).__name__]
    if isinstance(t, A.RandAugment):
        ops = t.ops
        w = 'none' if t.choice_weights is None else ','.join(repr(float(x)) for x in t.choice_weights)
        lines.append(f'n={t.num_layers} weights={w}')
    elif isinstance(t, A.AugMixAugment):
        ops = t.ops
        lines.append(f'alpha={t.alpha!r} width={t.width} depth={t.depth} blended={int(t.blended)}')
    else:
        ops = [op for sub in t.policy for op in sub]
        lines.append('policy=' + ','.join(str(len(sub)) for sub in t.policy))
    for op in ops:
        lines.append(f'{op.name} p={op.prob!r} m={float(op.magnitude)!r} {hparams_text(op.hparams)}')
    return '\n'.join(lines)


def cmd_parse(out):
    from timm.data import create_transform
    from timm.data import auto_augment as A
    with open(os.path.join(out, 'parse.txt'), 'w') as f:
        for k, (cfg, h, w, interp, mean) in enumerate(PARSE_CONFIGS):
            t = create_transform((3, h, w), is_training=True, auto_augment=cfg, interpolation=interp, mean=mean,
                                 use_prefetcher=True)
            aa = [x for x in t.transforms if isinstance(x, (A.RandAugment, A.AutoAugment, A.AugMixAugment))][0]
            with open(os.path.join(out, f'repr_{k}.txt'), 'w') as r:
                r.write(repr(t))
            with open(os.path.join(out, f'describe_{k}.txt'), 'w') as r:
                r.write(describe(aa))
            f.write(f'ok {cfg} {h} {w} {interp} {",".join(repr(x) for x in mean)} repr_{k}.txt describe_{k}.txt\n')
        for cfg in BAD_CONFIGS:
            try:
                create_transform((3, 224, 224), is_training=True, auto_augment=cfg, use_prefetcher=True)
                f.write(f'accepted {cfg}\n')
            except (AssertionError, ValueError, KeyError):
                f.write(f'raises {cfg}\n')
        # The level arguments of GaussianBlurRand (drawn inside the op) and of
        # every op at a magnitude above 10 (mmax).
        for name in A.LEVEL_TO_ARG:
            for m in (0, 3.3, 10, 14):
                fn = A.LEVEL_TO_ARG[name]
                saved = A.random.random
                A.random.random = lambda: 0.1
                try:
                    args = fn(m, dict(translate_const=100, translate_pct=0.45)) if fn else ()
                finally:
                    A.random.random = saved
                f.write(f'level {name} {m!r} {",".join(repr(float(x)) for x in args) or "-"}\n')


AUGMIX_CHAINS = [
    # (op name, magnitude, negate, resample)
    [('Rotate', 3, True, 'bilinear')],
    [('Equalize', 0, False, 'bilinear'), ('ShearX', 5, False, 'bicubic')],
    [('PosterizeIncreasing', 5, False, 'bilinear'), ('SolarizeIncreasing', 7, False, 'bilinear'),
     ('TranslateXRel', 4, True, 'bicubic')],
    [('ColorIncreasing', 8, True, 'bilinear'), ('AutoContrast', 0, False, 'bilinear')],
]


def cmd_augmix(out):
    from timm.data import auto_augment as A
    imgs = images()
    rs = np.random.RandomState(5)
    lines = []
    for iname in ('smooth_rgb', 'photo0', 'fmnist1'):
        if iname not in imgs:
            continue
        a = imgs[iname]
        a.tofile(os.path.join(out, f'{iname}.in'))
        for alpha in (1.0, 0.5):
            weights = np.float32(rs.dirichlet([alpha] * len(AUGMIX_CHAINS)))
            m = np.float32(rs.beta(alpha, alpha))
            chains = []
            for chain in AUGMIX_CHAINS:
                fns = []
                for name, mag, negate, resample in chain:
                    def fn(img, name=name, mag=mag, negate=negate, resample=resample):
                        args, res, _ = run_op(name, mag, negate, from_pil(img), resample)
                        return to_pil(res)
                    fns.append(fn)
                chains.append(fns)
            aug = A.AugMixAugment(ops=[], alpha=alpha, width=len(chains), depth=-1)
            for blended in (0, 1):
                # Drive timm's own mixing code: np.random.randint gives each
                # chain's depth, np.random.choice its ops, in order.
                queue = list(chains)
                saved = (np.random.randint, np.random.choice)
                np.random.randint = lambda lo, hi: len(queue[0])
                np.random.choice = lambda ops, depth, replace=True: queue.pop(0)
                try:
                    img = to_pil(a)
                    res = aug._apply_blended(img, weights, m) if blended else aug._apply_basic(img, weights, m)
                finally:
                    np.random.randint, np.random.choice = saved
                tag = f'{iname}_{len(lines)}'
                from_pil(res).tofile(os.path.join(out, tag + '.out'))
                h, w, c = a.shape
                lines.append(f'{iname} {h} {w} {c} {blended} {",".join(repr(float(x)) for x in weights)} '
                             f'{float(m)!r} {tag}.out')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


class RecordingRandom:
    """Python's random module functions _erase calls, recording each draw."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.draws = []

    def random(self):
        v = self.rng.random()
        self.draws.append(f'r:{v!r}')
        return v

    def uniform(self, a, b):
        return a + (b - a) * self.random()

    def randint(self, lo, hi):
        v = self.rng.randint(lo, hi)
        self.draws.append(f'i:{lo}:{hi}:{v}')
        return v


class RecordingImage:
    """Stands in for the image tensor: records the erased slices."""

    def __init__(self):
        self.rects = []

    def __setitem__(self, key, value):
        _, ys, xs = key
        self.rects.append(f'{ys.start},{xs.start},{ys.stop - ys.start},{xs.stop - xs.start}')


ERASING_CONFIGS = [
    # (probability, min_count, max_count, H, W, trials)
    (0.5, 1, 1, 224, 224, 300),
    (1.0, 1, 3, 32, 48, 300),
    (0.25, 1, 5, 7, 9, 200),
    (1.0, 2, 4, 224, 160, 200),
    (1.0, 1, 1, 2, 2, 50),
]


def cmd_erasing(out):
    import timm.data.random_erasing as RE
    with open(os.path.join(out, 'erasing.txt'), 'w') as f:
        for k, (p, lo, hi, h, w, trials) in enumerate(ERASING_CONFIGS):
            re_ = RE.RandomErasing(p, min_count=lo, max_count=hi, mode='const', device='cpu')
            f.write(f'config {p!r} {lo} {hi} {h} {w} {trials} {re_!r}\n')
            rec = RecordingRandom(k)
            saved = RE.random
            RE.random = rec
            try:
                for _ in range(trials):
                    rec.draws = []
                    img = RecordingImage()
                    re_._erase(img, 3, h, w, None)
                    f.write('trial ' + ' '.join(rec.draws) + ' | ' + ' '.join(img.rects) + '\n')
            finally:
                RE.random = saved
        for mode in ('const', 'rand', 'pixel'):
            f.write(f"repr {RE.RandomErasing(0.25, mode=mode, max_count=3, device='cpu')!r}\n")


JSD_CASES = [
    # (batch per split, classes, splits, alpha, smoothing, logit scale)
    (8, 10, 3, 12, 0.1, 1.0),
    (5, 7, 2, 12, 0.0, 3.0),
    (4, 1000, 3, 1.5, 0.2, 8.0),
    (6, 3, 4, 12, None, 20.0),  # large logits: the mixture clamp is active
]


def cmd_jsd(out):
    import torch
    from timm.loss import JsdCrossEntropy
    g = torch.Generator().manual_seed(0)
    lines = []
    for k, (b, c, splits, alpha, smoothing, scale) in enumerate(JSD_CASES):
        logits = (torch.randn(b * splits, c, generator=g, dtype=torch.float32) * scale).requires_grad_()
        target = torch.randint(0, c, (b,), generator=g).repeat(splits)
        loss = JsdCrossEntropy(num_splits=splits, alpha=alpha, smoothing=smoothing)(logits, target)
        loss.backward()
        logits.detach().numpy().tofile(os.path.join(out, f'logits_{k}.f32'))
        target.numpy().astype(np.int64).tofile(os.path.join(out, f'target_{k}.i64'))
        logits.grad.numpy().tofile(os.path.join(out, f'grad_{k}.f32'))
        lines.append(f'{k} {b * splits} {c} {splits} {float(alpha)!r} {float(smoothing or 0)!r} {loss.item()!r}')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


BASIC_REPR_CONFIGS = [
    # (train_crop_mode, H, W, interpolation, color_jitter, color_jitter_prob, grayscale_prob,
    #  gaussian_blur_prob, auto_augment, scale, ratio, hflip)
    ('rkrc', 192, 160, 'random', 0.4, 0.8, 0.2, 0.5, None, (0.08, 1.0), (3. / 4., 4. / 3.), 0.5),
    ('rkrr', 224, 224, 'bicubic', 0.4, None, 0.2, 0.5, 'rand-m9-mstd0.5-inc1', (0.08, 1.0), (3. / 4., 4. / 3.), 0.5),
    ('rrc', 96, 128, 'bilinear', 0.3, 0.0, 1.0, 0.0, None, (0.35, 1.0), (0.5, 2.0), 0.0),
    (None, 224, 224, 'bicubic', 0.4, 0.5, 0.1, 0.0, '3a', (0.08, 1.0), (3. / 4., 4. / 3.), 0.5),
    ('rkrc', 160, 192, 'nearest', None, 0.8, 0.0, 1.0, None, (0.8, 1.0), (0.9, 1 / 0.9), 0.5),
    ('rkrr', 64, 64, 'bilinear', 0.4, 1.0, 0.3, 0.3, 'v0', (0.5, 0.9), (0.8, 1.25), 0.0),
]


class QueueRandom:
    """Stands in for the random module in timm.data.transforms: returns the
    draws the C++ plugin made (r: random(), u: uniform(a, b), i: randint(a, b),
    c: choice's index), checking their kind and range."""

    def __init__(self, draws):
        self.queue = list(draws)

    def _pop(self, kind):
        assert self.queue, f'no draw left for {kind}'
        k, v = self.queue.pop(0).split(':', 1)
        assert k == kind, f'expected a {kind} draw, got {k}:{v}'
        return v

    def random(self):
        return float(self._pop('r'))

    def uniform(self, a, b):
        v = float(self._pop('u'))
        assert min(a, b) <= v <= max(a, b), f'uniform({a!r}, {b!r}) got {v!r}'
        return v

    def randint(self, a, b):
        v = int(self._pop('i'))
        assert a <= v <= b, f'randint({a}, {b}) got {v}'
        return v

    def choice(self, seq):
        return seq[int(self._pop('c'))]


def none_or(v):
    return '-' if v is None else repr(v)


def basic_case(out, f, fields):
    import timm.data.transforms as T
    from timm.data import create_transform
    from torchvision import transforms
    from torchvision.transforms import functional as F
    kind, tag, in_file, h, w, c = fields[:6]
    a = np.fromfile(os.path.join(out, in_file), dtype=np.uint8).reshape(int(h), int(w), int(c))
    if kind == 'rkr':
        mode, th, tw, interp, s0, s1, r0, r1 = fields[6:14]
        t = create_transform((3, int(th), int(tw)), is_training=True, train_crop_mode=mode,
                             scale=(float(s0), float(s1)), ratio=(float(r0), float(r1)), hflip=0.,
                             color_jitter=None, interpolation=interp, use_prefetcher=True)
        crop = transforms.Compose(t.transforms[:2])
        fake = QueueRandom(fields[14:])
        saved = T.random
        T.random = fake
        try:
            res = crop(to_pil(a))
        finally:
            T.random = saved
        assert not fake.queue, f'{tag}: draws left over: {fake.queue}'
    elif kind == 'blur':
        sigma = float(fields[6])
        res = F.gaussian_blur(to_pil(a), [23, 23], [sigma, sigma])
    elif kind == 'gray':
        res = transforms.RandomGrayscale(p=1.0)(to_pil(a))
    else:
        raise ValueError(kind)
    r = from_pil(res)
    r.tofile(os.path.join(out, tag + '.out'))
    f.write(f'{tag} {r.shape[0]} {r.shape[1]} {r.shape[2]}\n')


def cmd_basic(out):
    from timm.data import create_transform
    with open(os.path.join(out, 'basic_reprs.txt'), 'w') as f:
        for k, (mode, h, w, interp, cj, cjp, gray, blur, aa, scale, ratio, hflip) in enumerate(BASIC_REPR_CONFIGS):
            t = create_transform((3, h, w), is_training=True, train_crop_mode=mode, interpolation=interp,
                                 color_jitter=cj, color_jitter_prob=cjp, grayscale_prob=gray,
                                 gaussian_blur_prob=blur, auto_augment=aa, scale=scale, ratio=ratio, hflip=hflip,
                                 use_prefetcher=True)
            with open(os.path.join(out, f'basic_repr_{k}.txt'), 'w') as r:
                r.write(repr(t))
            f.write(f'{mode or "-"} {h} {w} {interp} {none_or(cj)} {none_or(cjp)} {gray!r} {blur!r} {aa or "-"} '
                    f'{scale[0]!r} {scale[1]!r} {ratio[0]!r} {ratio[1]!r} {hflip!r} basic_repr_{k}.txt\n')
    cases = os.path.join(out, 'basic_cases.txt')
    if not os.path.exists(cases):
        return
    with open(cases) as src, open(os.path.join(out, 'basic_results.txt'), 'w') as f:
        for line in src:
            if line.strip():
                basic_case(out, f, line.split())


if __name__ == '__main__':
    command, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ''
    if out:
        os.makedirs(out, exist_ok=True)
    {'ops': cmd_ops, 'levels': cmd_levels, 'parse': cmd_parse, 'augmix': cmd_augmix,
     'erasing': cmd_erasing, 'jsd': cmd_jsd, 'basic': cmd_basic}[command](out)
