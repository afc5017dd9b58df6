"""Photo-like JPEGs for the JPEG tests and the data benchmark.

No photographs are installed on the build machines, so images are
synthesised with natural images' statistics: a 1/f amplitude spectrum
(random phases) per colour channel with correlated channels, plus a few
hard-edged shapes, encoded by PIL (libjpeg-turbo) at quality 90, 4:2:0.

Usage: jpeg_oracle.py <outdir> <count> <height> <width> [seed]
Writes <outdir>/img<i>.jpg.
"""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw


def natural_image(rng, height, width):
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.sqrt(fy * fy + fx * fx)
    f[0, 0] = 1.0
    amplitude = 1.0 / f ** 1.1
    base = rng.standard_normal((height, width // 2 + 1)) + 1j * rng.standard_normal((height, width // 2 + 1))
    channels = []
    for _ in range(3):
        # mostly shared structure, some per-channel colour variation
        own = rng.standard_normal(base.shape) + 1j * rng.standard_normal(base.shape)
        field = np.fft.irfft2((0.8 * base + 0.45 * own) * amplitude, s=(height, width))
        field = (field - field.mean()) / (field.std() + 1e-9)
        channels.append(field)
    img = np.stack(channels, axis=-1) * rng.uniform(35, 60) + rng.uniform(70, 180, size=3)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(rng.integers(2, 6)):
        x0, y0 = rng.integers(0, width), rng.integers(0, height)
        x1, y1 = x0 + rng.integers(20, width // 2), y0 + rng.integers(20, height // 2)
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    return pil


def main():
    outdir, count, height, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        natural_image(rng, height, width).save(os.path.join(outdir, f'img{i}.jpg'), quality=90)


if __name__ == '__main__':
    main()
