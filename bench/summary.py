"""bench/run_all.sh's one table: the benchmarks append rows, this prints them.

Each bench script given --summary FILE appends one JSON line per comparison
(append_summary); `bench/summary.py FILE` prints them as one Markdown table,
with each ratio's spread and whether it meets its target.
"""
import json
import sys


def append_summary(path, benchmark, timm_cpp, timm, ratio, lower_is_better=False, target=None):
    """Appends one row to the JSON-lines file `path`.

    timm_cpp and timm are the two sides' median figures; ratio is an
    interleave.Ratio of timm-cpp over timm (a time ratio when
    lower_is_better); target is the ratio to reach (default 1.0).
    """
    if target is None:
        target = 1.0
    row = {"benchmark": benchmark, "timm_cpp": timm_cpp, "timm": timm, "ratio": ratio.median, "low": ratio.low,
           "high": ratio.high, "lower_is_better": lower_is_better, "target": target}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def meets(row):
    return row["ratio"] <= row["target"] if row["lower_is_better"] else row["ratio"] >= row["target"]


def print_table(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print("| benchmark | timm-cpp | timm | ratio (median) | spread | target | met |")
    print("|---|---:|---:|---:|---|---|---|")
    for row in rows:
        target = ("<= " if row["lower_is_better"] else ">= ") + f"{row['target']:.1f}"
        print(f"| {row['benchmark']} | {row['timm_cpp']:.2f} | {row['timm']:.2f} | {row['ratio']:.2f} | "
              f"{row['low']:.2f}-{row['high']:.2f} | {target} | {'yes' if meets(row) else 'no'} |")
    met = sum(meets(row) for row in rows)
    print(f"\n{met} of {len(rows)} comparisons meet their target.")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/summary.py FILE (the JSON lines the benchmarks' --summary wrote)")
    print_table(sys.argv[1])
