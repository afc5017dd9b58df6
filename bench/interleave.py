"""Interleaved, repeated timing of several sides, and ratios with their spread.

The build machines are shared and their speed moves between runs (the same
model's ratio has moved by 20% between two runs of models.py), so a
comparison runs its sides alternately (A B A B ...) `repeats` times and
reports the median of the per-repeat ratios with their min-max spread. A
change counts as a win only when it clears the spread.

    rates = interleave([("timm-cpp", run_cpp), ("timm", run_python)], repeats=3)
    print(Ratio.of(rates["timm-cpp"], rates["timm"]))   # 1.07x (spread 0.98-1.12)
"""
import statistics


def interleave(sides, repeats, on_result=None):
    """Calls each side's function once per repeat, in turn; returns {label: [result per repeat]}.

    sides: (label, fn) pairs; fn() returns a figure (images/s, ms, ...).
    on_result(repeat, label, figure), when given, sees each figure as it comes.
    """
    figures = {label: [] for label, _ in sides}
    for repeat in range(repeats):
        for label, fn in sides:
            figure = fn()
            figures[label].append(figure)
            if on_result:
                on_result(repeat, label, figure)
    return figures


class Ratio:
    """The median of per-repeat ratios numerator / denominator, with their min and max."""

    def __init__(self, ratios):
        if not ratios:
            raise ValueError("Ratio needs at least one repeat")
        self.median = statistics.median(ratios)
        self.low = min(ratios)
        self.high = max(ratios)

    @classmethod
    def of(cls, numerators, denominators):
        return cls([a / b for a, b in zip(numerators, denominators, strict=True)])

    def __str__(self):
        return f"{self.median:.2f}x (spread {self.low:.2f}-{self.high:.2f})"


def median(figures):
    return statistics.median(figures)

