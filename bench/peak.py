"""This CPU's sustained matmul FLOP/s through torch: the ceiling for models.py.

Times square matrix products (fp32 and bfloat16, several sizes) on the given
number of threads for a few seconds each and reports the best sustained rate
of each dtype: 2 n^3 FLOPs per product over the wall time of the timed loop.
Each product runs two ways: torch.mm, and the same product as a 1x1
convolution (an n-channel, n-pixel image through an n-filter bank), because
torch routes them to different GEMMs. On an AMD CPU torch.mm's float32 GEMM
(MKL) takes a slower path than oneDNN's convolution kernels: 218.7 against
440.0 GFLOP/s on 2 threads here (2026-12-06), so with torch.mm alone
resnet18's forward+backward measured 155% of "peak". The best of the two is
the figure.
A model's forward+backward FLOP/s over it (models.py --peak) is the fraction
of what this CPU can do at all, for either side.

Usage: bench/peak.py [--threads 2] [--sizes 1024 2048] [--seconds 3] [--json FILE]
"""
import argparse
import json
import os
import sys
import time

import torch


def matmul_product(dtype, n):
    """torch.mm of two n x n matrices."""
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    return lambda: torch.mm(a, b, out=out)


def conv1x1_product(dtype, n):
    """The same n x n x n product as a 1x1 convolution: n filters over an
    n-channel image of n pixels (n = 32 x n/32 pixels)."""
    image = torch.randn(1, n, 32, n // 32).to(dtype)
    filters = torch.randn(n, n, 1, 1).to(dtype)
    return lambda: torch.nn.functional.conv2d(image, filters)


def sustained_flops(product, n, seconds):
    for _ in range(2):  # warm-up: oneDNN/MKL pick and cache their kernels
        product()
    products = 0
    start = time.perf_counter()
    while True:
        product()
        products += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return 2.0 * n**3 * products / elapsed


ROUTES = {"mm": matmul_product, "conv1x1": conv1x1_product}


def measure_routes(threads, sizes, seconds):
    """{dtype: {route: FLOP/s}}: the best size of each dtype and route."""
    torch.set_num_threads(threads)
    with torch.no_grad():
        return {str(dtype).removeprefix("torch."):
                {route: max(sustained_flops(make(dtype, n), n, seconds) for n in sizes)
                 for route, make in ROUTES.items()}
                for dtype in (torch.float32, torch.bfloat16)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", help="write {dtype: FLOP/s} here (models.py --peak reads it)")
    args = parser.parse_args()
    routes = measure_routes(args.threads, args.sizes, args.seconds)
    peak = {dtype: max(by_route.values()) for dtype, by_route in routes.items()}
    for dtype, by_route in routes.items():
        detail = ", ".join(f"{route} {flops / 1e9:.1f}" for route, flops in by_route.items())
        print(f"peak {dtype:9s} matmul, {args.threads} threads: {peak[dtype] / 1e9:8.1f} GFLOP/s ({detail})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, **peak}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
