"""Interleaved, repeated timing of several sides, and ratios with their spread.

The build machines are shared and their speed moves between runs (the same
model's ratio has moved by 20% between two runs of models.py), so a
comparison runs its sides alternately (A B A B ...) `repeats` times and
reports the median of the per-repeat ratios with their min-max spread. A
change counts as a win only when it clears the spread.

    rates = interleave([("timm-cpp", run_cpp), ("timm", run_python)], repeats=3)
    print(Ratio.of(rates["timm-cpp"], rates["timm"]))   # 1.07x (spread 0.98-1.12)

A comparison whose answer is already plain need not run every repeat:
`settled=settled_beyond("timm-cpp", "timm", target=1.0, margin=0.3)` stops
the repeats once every ratio so far lies more than 30% beyond the target, on
one side of it (bench/run_all.sh: efficientnet_b2 fp32 at 2.07x needs no
second repeat to say it is above 1.0; resnet18 at 1.07x runs them all).
"""
import argparse
import statistics
import time


def interleave(sides, repeats, on_result=None, settled=None):
    """Calls each side's function once per repeat, in turn; returns {label: [result per repeat]}.

    sides: (label, fn) pairs; fn() returns a figure (images/s, ms, ...).
    on_result(repeat, label, figure), when given, sees each figure as it comes.
    settled(figures), when given, is asked after each repeat but the last; the
    repeats stop when it returns True (settled_beyond).
    """
    figures = {label: [] for label, _ in sides}
    for repeat in range(repeats):
        for label, fn in sides:
            figure = fn()
            figures[label].append(figure)
            if on_result:
                on_result(repeat, label, figure)
        if settled and repeat + 1 < repeats and settled(figures):
            break
    return figures


def settled_beyond(numerator, denominator, target, margin):
    """A `settled` test for interleave: True once every ratio numerator / denominator so far lies beyond
    target x (1 + margin), or every one below target x (1 - margin). margin 0 (or None): never settled.

    The margin must exceed how far one repeat strays from the median of several on the machine: up to 30%
    in bench/run_all.sh's reports of 2026-12-06 on the Intel host (timm-benchmark resnet50 inference 1.12
    against a median of 1.46; resnet50 bf16 1.20 against 1.00), so run_all passes 0.3.
    """
    def settled(figures):
        if not margin:
            return False
        ratios = [a / b for a, b in zip(figures[numerator], figures[denominator], strict=True)]
        return all(r > target * (1 + margin) for r in ratios) or all(r < target * (1 - margin) for r in ratios)

    return settled


def timed_window(step, iters, min_seconds=0.0):
    """Calls step() at least `iters` times and on until `min_seconds` have passed (timm-benchmark
    --min-bench-time's rule); returns (calls, wall seconds)."""
    start = time.perf_counter()
    done = 0
    while done < iters or time.perf_counter() - start < min_seconds:
        step()
        done += 1
    return done, time.perf_counter() - start


def seconds(text):
    """argparse type of a duration flag: a number of seconds >= 0 (NaN refused)."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text}")
    return value


class Ratio:
    """The median of per-repeat ratios numerator / denominator, with their min and max."""

    def __init__(self, ratios):
        if not ratios:
            raise ValueError("Ratio needs at least one repeat")
        self.median = statistics.median(ratios)
        self.low = min(ratios)
        self.high = max(ratios)
        self.repeats = len(ratios)

    @classmethod
    def of(cls, numerators, denominators):
        return cls([a / b for a, b in zip(numerators, denominators, strict=True)])

    def __str__(self):
        if self.repeats == 1:
            return f"{self.median:.2f}x (1 repeat)"
        return f"{self.median:.2f}x (spread {self.low:.2f}-{self.high:.2f})"


def median(figures):
    return statistics.median(figures)

