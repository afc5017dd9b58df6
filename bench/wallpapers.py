"""An ImageNet-like image folder made from real photographs: Debian's desktop
wallpapers (package plasma-workspace-wallpapers, installed here with apt-get
when missing), for the input pipeline and end-to-end benchmarks. Synthetic
images compress differently from photographs, so decode-bound figures need
real ones; no photographs come with the build machines otherwise.

Each photograph (the largest JPEG of a wallpaper's `contents/images/`; the
wallpapers shipped as PNG are drawings and gradients, left out) is a class.
From each, random windows (2-30% of its area, aspect 3/4 to 4/3) are cut,
resized so the longer side is 500 (ImageNet's typical 500x375 / 500x333) and
saved as JPEG quality 90 under ROOT/train/<wallpaper>/. The folder is made
once: a marker file records the parameters, and a later call with the same
ones returns at once; a different call rebuilds it. Made in a temporary folder
beside ROOT and renamed, so an interrupted run leaves nothing half-written.

    root = wallpapers.ensure_folder('/tmp/timm-cpp-bench-wallpapers', count=3000)

Usage: bench/wallpapers.py [--root DIR] [--count 3000]   (prints the folder)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

PACKAGE = 'plasma-workspace-wallpapers'
WALLPAPERS = '/usr/share/wallpapers'
DEFAULT_ROOT = '/tmp/timm-cpp-bench-wallpapers'
LONG_SIDE = 500
QUALITY = 90


def install_package():
    """apt-get installs the wallpapers unless dpkg has them (root, or through sudo)."""
    status = subprocess.run(['dpkg-query', '-W', '-f=${Status}', PACKAGE], capture_output=True, text=True)
    if 'install ok installed' in status.stdout:
        return
    sudo = [] if os.geteuid() == 0 else ['sudo']
    print(f'[wallpapers] installing Debian package {PACKAGE} (about 94 MB)', file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    for cmd in (['apt-get', 'update', '-qq'], ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', PACKAGE]):
        proc = subprocess.run(sudo + cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f'wallpapers: {" ".join(cmd)} failed ({proc.returncode}); the benchmark needs Debian package '
                     f'{PACKAGE}:\n{proc.stderr.strip()}')


def source_images():
    """(class name, path of its largest JPEG) for each wallpaper shipped as JPEG, sorted by name."""
    sources = []
    for name in sorted(os.listdir(WALLPAPERS)):
        images = os.path.join(WALLPAPERS, name, 'contents', 'images')
        if not os.path.isdir(images):
            continue

        def pixels(file):  # the files are named WIDTHxHEIGHT.ext
            width, _, height = os.path.splitext(file)[0].partition('x')
            return int(width) * int(height) if width.isdigit() and height.isdigit() else 0

        files = [f for f in os.listdir(images) if f.lower().endswith(('.jpg', '.jpeg'))]
        if files:
            sources.append((name, os.path.join(images, max(files, key=pixels))))
    if not sources:
        sys.exit(f'wallpapers: no JPEGs under {WALLPAPERS}/*/contents/images (is {PACKAGE} installed?)')
    return sources


def random_window(rng, width, height):
    """A window of 2-30% of the area with aspect 3/4..4/3, inside width x height."""
    area = rng.uniform(0.02, 0.30) * width * height
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    w = min(width, int(round(np.sqrt(area * aspect))))
    h = min(height, int(round(np.sqrt(area / aspect))))
    left = int(rng.integers(0, width - w + 1))
    top = int(rng.integers(0, height - h + 1))
    return left, top, left + w, top + h


def write_crops(out, sources, count, seed):
    from PIL import Image
    rng = np.random.default_rng(seed)
    for c, (name, path) in enumerate(sources):
        os.makedirs(os.path.join(out, 'train', name))
        with Image.open(path) as image:
            picture = image.convert('RGB')
        # count images in all, spread over the classes as evenly as they go.
        for i in range(count // len(sources) + (1 if c < count % len(sources) else 0)):
            box = random_window(rng, *picture.size)
            w, h = box[2] - box[0], box[3] - box[1]
            scale = LONG_SIDE / max(w, h)
            crop = picture.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BICUBIC, box=box)
            crop.save(os.path.join(out, 'train', name, f'{name}_{i:05d}.jpg'), quality=QUALITY)


def ensure_folder(root=DEFAULT_ROOT, count=3000, seed=0):
    """The image folder at `root` (ImageFolder layout, train/ only), made when missing or different."""
    params = {'package': PACKAGE, 'sources': 'jpeg', 'count': count, 'seed': seed, 'long_side': LONG_SIDE, 'quality': QUALITY}
    marker = os.path.join(root, '.wallpapers.json')
    if os.path.exists(marker):
        with open(marker) as f:
            if json.load(f) == params:
                return root
    install_package()
    sources = source_images()
    print(f'[wallpapers] writing {count} crops of {len(sources)} wallpapers to {root}', file=sys.stderr)
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.wallpapers-', dir=parent)
    try:
        write_crops(tmp, sources, count, seed)
        with open(os.path.join(tmp, '.wallpapers.json'), 'w') as f:
            json.dump(params, f)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', default=DEFAULT_ROOT)
    parser.add_argument('--count', type=int, default=3000)
    args = parser.parse_args()
    print(ensure_folder(args.root, args.count))


if __name__ == '__main__':
    main()
