"""Start-up time of timm-run: process start, plugin discovery and loading,
config parsing. Runs `timm-run --list-models` (which stops right after
start-up) N times and prints the median and max wall time, and the time
timm-run itself reports for loading plugins and parsing the config.

Usage: bench/startup.py [--timm-run PATH] [-n 10]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--timm-run", default=os.path.join(here, "..", "build", "bin", "timm-run"))
    parser.add_argument("-n", type=int, default=10)
    args = parser.parse_args()

    walls = []
    for _ in range(args.n):
        start = time.perf_counter()
        subprocess.run([args.timm_run, "--list-models"], check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
    # The in-process figure: a run that stops at the first epoch's data.
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([args.timm_run, "--model", "resnet18", "--epochs", "0", "--output", out,
                               "--experiment", "startup"], capture_output=True, text=True)
    match = re.search(r"Start-up: (\d+) plugins, (\d+) registry entries, config parsed in ([0-9.]+) s", proc.stdout)
    print(f"timm-run --list-models, {args.n} runs: median {statistics.median(walls):.3f} s, "
          f"max {max(walls):.3f} s (whole process)")
    if match:
        print(f"in-process: {match.group(1)} plugins, {match.group(2)} entries loaded and config parsed "
              f"in {match.group(3)} s")


if __name__ == "__main__":
    main()
