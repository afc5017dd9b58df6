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


if __name__ == '__main__':
    command, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ''
    if out:
        os.makedirs(out, exist_ok=True)
    {'ops': cmd_ops}[command](out)
