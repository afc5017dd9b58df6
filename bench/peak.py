"""This CPU's sustained matmul FLOP/s through torch: the ceiling for models.py.

Times square torch.mm products (fp32 and bfloat16, several sizes) on the given
number of threads for a few seconds each and reports the best sustained rate
of each dtype: 2 n^3 FLOPs per product over the wall time of the timed loop.
A model's forward+backward FLOP/s over this figure (models.py --peak) is the
fraction of what this CPU can do at all, for either side.

Usage: bench/peak.py [--threads 2] [--sizes 1024 2048] [--seconds 3] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

import torch


def sustained_flops(dtype, n, seconds):
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    for _ in range(2):  # warm-up: oneDNN/MKL pick and cache their kernels
        torch.mm(a, b, out=out)
    products = 0
    start = time.perf_counter()
    while True:
        torch.mm(a, b, out=out)
        products += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return 2.0 * n**3 * products / elapsed


def measure_peak(threads, sizes, seconds):
    """{'float32': FLOP/s, 'bfloat16': FLOP/s}: the best size of each dtype."""
    torch.set_num_threads(threads)
    return {str(dtype).removeprefix("torch."): max(sustained_flops(dtype, n, seconds) for n in sizes)
            for dtype in (torch.float32, torch.bfloat16)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", help="write {dtype: FLOP/s} here (models.py --peak reads it)")
    args = parser.parse_args()
    peak = measure_peak(args.threads, args.sizes, args.seconds)
    for dtype, flops in peak.items():
        print(f"peak {dtype:9s} matmul, {args.threads} threads: {flops / 1e9:8.1f} GFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, **peak}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
