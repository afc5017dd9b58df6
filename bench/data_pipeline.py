"""Images/s of the train input pipeline: timm-cpp's loader (2 threads) against
Python timm's loader (2 workers), same transforms, same images, same run;
and the decode-only rate of timm-cpp, libjpeg-turbo itself and PIL.

Images: real photographs at ImageNet-like sizes, made once by
bench/wallpapers.py from Debian's desktop wallpapers (3000 crops, longer side
500, JPEG quality 90; the package is installed when missing). --synthetic:
photo-like JPEGs (500x375) from tests/oracle/jpeg_oracle.py instead (1/f-spectrum
colour fields with hard-edged shapes, quality 90; they compress differently,
the comparison before 2026-12-05 16:30). --images DIR: any folder of JPEGs
with class sub-folders under DIR/train (ImageFolder).

Stages: decode, RandomResizedCrop 224 (bilinear), horizontal flip,
RandAugment (--aa rand-m9-mstd0.5-inc1), normalisation and random erasing
(--reprob 0.25 --remode pixel; timm's prefetcher normalises and erases the
uint8 batch; so does timm-cpp), no colour jitter (timm turns it off under
RandAugment). --basic leaves RandAugment and random erasing out on both
sides (the comparison before they were in).

Extra row: timm-cpp's loader with timm-run's --jpeg-dct-scale (JPEGs decoded
at the DCT scale, 1/2 to 1/8, that still covers the crop at the output size;
not PIL's pixels) against the same timm figure. The scale is 1 unless the
crop is at least twice the output on both sides, so at 224 on 500x375 images
it rarely helps; --img-size (both sides) or larger --images show its effect.

--naflex: the NaFlex train loader instead (timm-run --naflex-loader against
timm's create_naflex_loader, its defaults: sequence lengths 128 256 576 784
1024, patch 16, a token budget of --batch-size x 1024): decode,
RandomResizedCropToSequence, flip, RandAugment, patchify and pad per batch,
normalisation and PatchRandomErasing of the patches; images/s counts the
images of the variable-size batches (no --jpeg-dct-scale row: the sequence
crop decodes whole images on both sides).

The loaders run alternately --repeats times (bench/interleave.py): the
figures are medians, the ratios with their spread (target >= 2.0).
--no-decode leaves the decode-only rates out (an explanation, not a target:
best of three passes over the images per decoder, about 30 s;
bench/run_all.sh passes it).

Usage: bench/data_pipeline.py [--images DIR | --synthetic] [--count 3000] [--threads 2] [--batch-size 64]
       [--img-size 224] [--repeats 3] [--basic] [--naflex] [--no-decode] [--summary FILE]
       [--bench-exe build/bin/timm-bench-data]
"""
import argparse
import io
import os
import re
import subprocess
import sys
import time

import numpy as np

from interleave import Ratio, interleave, median
from summary import append_summary
import wallpapers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'oracle'))


def make_images(folder, count, classes=10):
    from jpeg_oracle import natural_image
    rng = np.random.default_rng(0)
    for c in range(classes):
        os.makedirs(os.path.join(folder, 'train', f'class{c}'), exist_ok=True)
    for i in range(count):
        path = os.path.join(folder, 'train', f'class{i % classes}', f'img{i}.jpg')
        natural_image(rng, 375, 500).save(path, quality=90)


def run_cpp(exe, args):
    out = subprocess.run([exe] + args, check=True, capture_output=True, text=True).stdout
    return out


def allow_posterize_zero_bits():
    """Pillow >= 10.3 refuses posterize(img, 0), which timm's PosterizeIncreasing asks for at magnitude 10
    (reached by rand-m9-mstd0.5's noise), so timm's loader dies with a ValueError. Make the image black
    instead, as older Pillow and timm-cpp do (docs/augmentation.md), in the loader's forked workers too."""
    from PIL import Image, ImageOps
    posterize = ImageOps.posterize

    def posterize_or_black(image, bits):
        return Image.new(image.mode, image.size) if bits == 0 else posterize(image, bits)

    ImageOps.posterize = posterize_or_black


def second_epoch_rate(loader, batch_size_of):
    """Images/s of the loader's second epoch: the first starts the workers and warms the page cache."""
    for _ in range(2):
        start = time.perf_counter()
        n = 0
        for x, _ in loader:
            n += batch_size_of(x)
        rate = n / (time.perf_counter() - start)
    return rate


def python_loader_rate(root, threads, batch_size, with_aa, img_size=224):
    import torch
    from timm.data import create_dataset, create_loader
    ds = create_dataset('', root=root, split='train', is_training=True)
    kwargs = dict(auto_augment='rand-m9-mstd0.5-inc1', re_prob=0.25, re_mode='pixel') if with_aa else {}
    loader = create_loader(ds, input_size=(3, img_size, img_size), batch_size=batch_size, is_training=True,
                           use_prefetcher=True, device=torch.device('cpu'), num_workers=threads,
                           color_jitter=None, interpolation='bilinear', **kwargs)
    return second_epoch_rate(loader, lambda x: x.shape[0]), str(ds.transform)


def python_naflex_rate(root, threads, batch_size, with_aa):
    import torch
    from timm.data import create_dataset, create_naflex_loader
    ds = create_dataset('', root=root, split='train', is_training=True)
    kwargs = dict(auto_augment='rand-m9-mstd0.5-inc1', re_prob=0.25, re_mode='pixel') if with_aa else {}
    loader = create_naflex_loader(ds, patch_size=16, batch_size=batch_size, is_training=True, use_prefetcher=True,
                                  device=torch.device('cpu'), num_workers=threads, pin_memory=False,
                                  color_jitter=None, interpolation='bilinear', **kwargs)
    return (second_epoch_rate(loader, lambda x: x['patches'].shape[0]),
            'create_naflex_loader(patch_size=16, train_seq_lens=(128, 256, 576, 784, 1024))')


def naflex_main(a, with_aa, aug):
    """--naflex: the NaFlex train loaders, interleaved."""

    def cpp_rate():
        out = run_cpp(a.bench_exe, ['naflex', a.images, '--workers', str(a.threads), '--batch-size',
                                    str(a.batch_size)] + aug)
        stages = re.search(r'^stages (.*)$', out, re.M).group(1)
        if with_aa and ('RandAugment' not in stages or 'PatchRandomErasing' not in stages):
            raise RuntimeError(f'timm-bench-data naflex ran without RandAugment or erasing: {stages}')
        return float(re.findall(r'images/s ([\d.]+)', out)[-1]), stages

    runs = interleave([('timm-cpp', cpp_rate),
                       ('timm', lambda: python_naflex_rate(a.images, a.threads, a.batch_size, with_aa))], a.repeats)
    cpp_rates = [rate for rate, _ in runs['timm-cpp']]
    py_rates = [rate for rate, _ in runs['timm']]
    ratio = Ratio.of(cpp_rates, py_rates)
    print(f'timm-cpp stages: {runs["timm-cpp"][0][1]}')
    print(f'timm stages: {runs["timm"][0][1]}')
    print(f'NaFlex train pipeline, {a.threads} threads/workers, token budget {a.batch_size} x 1024, '
          f'median of {a.repeats}:')
    print(f'  timm-cpp  {median(cpp_rates):9.1f} images/s')
    print(f'  timm      {median(py_rates):9.1f} images/s')
    print(f'  ratio     {ratio}')
    if a.summary:
        row = f'NaFlex train input pipeline, {a.threads} workers{", RandAugment + RE" if with_aa else ""}'
        append_summary(a.summary, f'{row} (img/s)', median(cpp_rates), median(py_rates), ratio, target=2.0)


def pil_decode_rate(files):
    from PIL import Image
    blobs = [open(f, 'rb').read() for f in files]
    best = float('inf')
    for _ in range(3):  # best of three, as timm-bench-data
        start = time.perf_counter()
        for b in blobs:
            Image.open(io.BytesIO(b)).convert('RGB')
        best = min(best, time.perf_counter() - start)
    return len(blobs) / best


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--images', help='a folder with train/<class>/*.jpg (default: the wallpapers folder)')
    p.add_argument('--synthetic', action='store_true', help='photo-like synthetic JPEGs instead of the wallpapers')
    p.add_argument('--count', type=int, default=3000, help='images to make when the folder is made')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--batch-size', type=int, default=64)
    p.add_argument('--img-size', type=int, default=224, help='the crop output size, both sides (default 224)')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--basic', action='store_true', help='crop and flip only: no RandAugment, no random erasing')
    p.add_argument('--naflex', action='store_true', help='the NaFlex train loaders (--naflex-loader)')
    p.add_argument('--no-decode', action='store_true', help='leave the decode-only rates out')
    p.add_argument('--summary', help='append the train pipeline row to this JSON-lines file (bench/run_all.sh)')
    p.add_argument('--bench-exe', default=os.path.join(HERE, '..', 'build', 'bin', 'timm-bench-data'))
    a = p.parse_args()
    if a.images is None:
        a.images = '/tmp/timm-cpp-bench-jpegs' if a.synthetic else wallpapers.ensure_folder(count=a.count)
    train = os.path.join(a.images, 'train')
    if not os.path.isdir(train):
        print(f'making {a.count} photo-like JPEGs (500x375) in {a.images} ...', flush=True)
        make_images(a.images, a.count)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(train) for f in fs if f.endswith('.jpg'))
    print(f'{len(files)} JPEGs under {train}')

    with_aa = not a.basic
    if with_aa:
        allow_posterize_zero_bits()  # once: each loader's forked workers inherit it
    aug = ['--aa', 'rand-m9-mstd0.5-inc1', '--reprob', '0.25', '--remode', 'pixel'] if with_aa else \
        ['--aa', '', '--reprob', '0']

    if a.naflex:
        naflex_main(a, with_aa, aug)
        return
    size = [] if a.img_size == 224 else ['--img-size', str(a.img_size)]

    def cpp_train(extra=()):
        return run_cpp(a.bench_exe, ['train', a.images, '--workers', str(a.threads), '--batch-size', str(a.batch_size)]
                       + aug + size + list(extra))

    def checked(out, dct):
        """The stages timm-bench-data ran, after checking it ran the ones asked for."""
        stages = re.search(r'^stages (.*)$', out, re.M).group(1)
        if with_aa and 'RandAugment' not in stages:
            raise RuntimeError(f'timm-bench-data ran without RandAugment: {stages}')
        path = re.search(r'^jpeg-dct-scale (.*)$', out, re.M).group(1)
        if dct and path != 'on':
            raise RuntimeError(f'timm-bench-data --jpeg-dct-scale did not take the DCT path: {path}')
        return stages

    def cpp_rate_of(extra=()):  # (images/s, stages), each sample checked as it comes
        out = cpp_train(extra)
        return float(re.findall(r'images/s ([\d.]+)', out)[-1]), checked(out, '--jpeg-dct-scale' in extra)

    runs = interleave([('timm-cpp', cpp_rate_of),
                       ('timm-cpp --jpeg-dct-scale', lambda: cpp_rate_of(['--jpeg-dct-scale'])),
                       ('timm', lambda: python_loader_rate(a.images, a.threads, a.batch_size, with_aa, a.img_size))],
                      a.repeats)
    stages = runs['timm-cpp'][0][1]
    for side in ('timm-cpp', 'timm-cpp --jpeg-dct-scale'):
        runs[side] = [rate for rate, _ in runs[side]]
    cpp_rate = median(runs['timm-cpp'])
    dct_rate = median(runs['timm-cpp --jpeg-dct-scale'])
    py_rates = [rate for rate, _ in runs['timm']]
    py_rate, py_stages = median(py_rates), runs['timm'][0][1]
    ratio = Ratio.of(runs['timm-cpp'], py_rates)
    dct_ratio = Ratio.of(runs['timm-cpp --jpeg-dct-scale'], py_rates)
    print(f'stages: decode, RandomResizedCrop {a.img_size}, flip, normalise'
          f'{", rand-m9-mstd0.5-inc1, reprob 0.25 pixel" if with_aa else " (--basic: no RandAugment, no random erasing)"}')
    print(f'timm-cpp stages: {stages}')
    print(f'timm stages: {" ".join(py_stages.split())}')
    print(f'train pipeline, {a.threads} threads/workers, batch {a.batch_size}, median of {a.repeats}:')
    print(f'  timm-cpp                   {cpp_rate:9.1f} images/s')
    print(f'  timm-cpp --jpeg-dct-scale  {dct_rate:9.1f} images/s')
    print(f'  timm                       {py_rate:9.1f} images/s')
    print(f'  ratio                      {ratio}')
    print(f'  ratio, --jpeg-dct-scale    {dct_ratio}')
    if a.summary:
        row = (f'train input pipeline, {a.threads} workers{", RandAugment + RE" if with_aa else ""}'
               f'{"" if a.img_size == 224 else f", {a.img_size} px"}')
        append_summary(a.summary, f'{row} (img/s)', cpp_rate, py_rate, ratio, target=2.0)
        append_summary(a.summary, f'{row}, --jpeg-dct-scale (img/s)', dct_rate, py_rate, dct_ratio, target=2.0)

    if a.no_decode:
        return
    dec = run_cpp(a.bench_exe, ['decode', train])
    rates = dict(re.findall(r'^decode (\S+) images \d+ images/s ([\d.]+)', dec, re.M))
    pil = pil_decode_rate(files)
    print('decode only, one thread:')
    for name, label in (('timm-cpp', 'timm-cpp decode_image'), ('tjDecompress2', 'libjpeg-turbo tjDecompress2'),
                        ('timm-cpp-dct-1/2', 'timm-cpp 1/2 DCT-scaled')):
        r = float(rates[name])
        print(f'  {label:30s} {r:9.1f} images/s  ({r / pil:.2f}x PIL)')
    print(f'  {"PIL open + convert(RGB)":30s} {pil:9.1f} images/s')


if __name__ == '__main__':
    main()
