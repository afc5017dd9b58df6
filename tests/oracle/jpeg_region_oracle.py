"""JPEGs of every layout the region decoder handles, for its tests.

Photo-like content (jpeg_oracle.natural_image) saved by PIL (libjpeg-turbo)
as 4:2:0, 4:2:2 and 4:4:4, grayscale, progressive (also cut after a few
scans, so that libjpeg's block smoothing runs), with restart intervals,
with optimised Huffman tables, as Adobe RGB (no colour transform) and CMYK,
at odd sizes (down to 17x9); plus a truncated file and one with a corrupt
byte in its scan data.

Usage: jpeg_region_oracle.py <outdir>
Writes <outdir>/<name>.jpg and <outdir>/manifest.txt, one line per file:
"<name>.jpg <height> <width>".
"""
import io
import os
import sys

import numpy as np

from jpeg_oracle import natural_image

# name, height, width, PIL mode, save options
CASES = [
    ("photo_420", 375, 500, "RGB", dict(quality=90, subsampling=2)),
    ("photo_422", 333, 497, "RGB", dict(quality=85, subsampling=1)),
    ("photo_444", 500, 375, "RGB", dict(quality=95, subsampling=0)),
    ("gray", 333, 497, "L", dict(quality=90)),
    ("progressive_420", 375, 500, "RGB", dict(quality=90, subsampling=2, progressive=True)),
    ("progressive_444", 301, 257, "RGB", dict(quality=80, subsampling=0, progressive=True)),
    ("progressive_gray", 255, 333, "L", dict(quality=90, progressive=True)),
    ("restart_blocks_420", 375, 500, "RGB", dict(quality=90, subsampling=2, restart_marker_blocks=7)),
    ("restart_rows_422", 257, 383, "RGB", dict(quality=90, subsampling=1, restart_marker_rows=1)),
    ("progressive_restart_422", 241, 317, "RGB",
     dict(quality=90, subsampling=1, progressive=True, restart_marker_rows=2)),
    ("optimized_420", 289, 411, "RGB", dict(quality=75, subsampling=2, optimize=True)),
    ("adobe_rgb", 199, 263, "RGB", dict(quality=90, subsampling=0, keep_rgb=True)),
    ("cmyk", 123, 157, "CMYK", dict(quality=90)),
    ("tiny_420", 9, 17, "RGB", dict(quality=90, subsampling=2)),
    ("tiny_progressive", 17, 9, "RGB", dict(quality=90, subsampling=2, progressive=True)),
    ("large_420", 1001, 777, "RGB", dict(quality=90, subsampling=2)),
]


def scan_starts(data):
    """The offsets of the SOS markers of `data`, and of its EOI."""
    pos, starts = 2, []
    while pos + 2 <= len(data):
        assert data[pos] == 0xFF, "expected a marker"
        marker = data[pos + 1]
        if marker == 0xD9:
            return starts, pos
        if marker == 0xDA:
            starts.append(pos)
        pos += 2 + ((data[pos + 2] << 8) | data[pos + 3])
        if marker == 0xDA:
            # Entropy-coded data runs to the next marker other than RSTn.
            while not (data[pos] == 0xFF and data[pos + 1] != 0 and not 0xD0 <= data[pos + 1] <= 0xD7):
                pos += 1
    raise ValueError("no EOI marker")


def first_scans(data, keep):
    """The JPEG `data` with only its first `keep` scans, then EOI."""
    starts, _ = scan_starts(data)
    return data[: starts[keep]] + b"\xff\xd9" if keep < len(starts) else data


def repeat_last_scan(data, total):
    """The JPEG `data` with its last scan repeated until it has `total`."""
    starts, eoi = scan_starts(data)
    last = data[starts[-1] : eoi]
    return data[:eoi] + last * (total - len(starts)) + data[eoi:]


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(7)
    lines = []
    for name, height, width, mode, options in CASES:
        image = natural_image(rng, max(height, 64), max(width, 64)).crop((0, 0, width, height))
        image = image.convert(mode)
        image.save(os.path.join(outdir, name + ".jpg"), **options)
        lines.append(f"{name}.jpg {height} {width}")

    # Progressive files that stop after a few scans (kept: the DC scans and
    # the first AC ones): the coefficients stay imprecise, so libjpeg's block
    # smoothing runs, which reads the neighbouring blocks' DC values.
    for name, height, width, mode, sampling, keep in [
        ("partial_progressive_420", 279, 361, "RGB", 2, 4),
        ("partial_progressive_444", 203, 271, "RGB", 0, 3),
        ("dc_only_progressive_420", 279, 361, "RGB", 2, 1),
        ("dc_only_progressive_gray", 203, 271, "L", 0, 1),
    ]:
        out = io.BytesIO()
        natural_image(rng, height, width).convert(mode).save(out, format="JPEG", quality=90, subsampling=sampling,
                                                               progressive=True)
        with open(os.path.join(outdir, name + ".jpg"), "wb") as f:
            f.write(first_scans(out.getvalue(), keep))
        lines.append(f"{name}.jpg {height} {width}")

    # A progressive file whose last scan repeats until there are 600: over
    # TurboJPEG's limit of 500 (TJFLAG_LIMITSCANS), an error.
    out = io.BytesIO()
    natural_image(rng, 64, 64).save(out, format="JPEG", quality=90, progressive=True)
    with open(os.path.join(outdir, "many_scans.jpg"), "wb") as f:
        f.write(repeat_last_scan(out.getvalue(), 600))

    photo = io.BytesIO()
    natural_image(rng, 375, 500).save(photo, format="JPEG", quality=90)
    data = photo.getvalue()
    # Cut in the scan data: PIL refuses it ("image file is truncated").
    with open(os.path.join(outdir, "truncated.jpg"), "wb") as f:
        f.write(data[: len(data) * 3 // 5])
    # A byte of the scan data changed: libjpeg warns ("Corrupt JPEG data")
    # or fails, the same for every way of decoding it.
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0x5A
    with open(os.path.join(outdir, "corrupt.jpg"), "wb") as f:
        f.write(bytes(corrupt))
    lines.append("corrupt.jpg 375 500")

    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
