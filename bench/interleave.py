"""Interleaved, repeated timing of several sides, and ratios with their spread.

The build machines are shared and their speed moves between runs (the same
model's ratio has moved by 20% between two runs of models.py), so a
comparison runs its sides alternately (A B A B ...) `repeats` times and
reports the median of the per-repeat ratios with their min-max spread. A
change counts as a win only when it clears the spread.

    rates = interleave([("timm-cpp", run_cpp), ("timm", run_python)], repeats=3)
    print(Ratio.of(rates["timm-cpp"], rates["timm"]))   # 1.07x (spread 0.98-1.12)

A side may be a process that stays up between its repeats (Interleaved), so
that only its first run pays for start-up and warm-up.
"""
import collections
import statistics
import subprocess


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


class Interleaved:
    """A benchmark process that times one run per request: `timm-benchmark --interleave`, or
    bench/models.py's --python-side. It prints "--ready" once its model is built, then runs its
    warm-up and a timed run on the first request and a timed run on each later one, printing
    "--run RATE" (images/s) after each; its other output lines are its log.

    A side starts and warms up once, then alternates with the other (interleave()): every repeat is
    one timed run, and no repeat pays for interpreter start-up, model creation and warm-up again
    (those were a third of models.py's time in bench/run_all.sh). The one side waits while the
    other runs. Use it in a `with` block: the process is killed if the comparison fails.
    """

    def __init__(self, label, cmd):
        self.label = label
        self.log = collections.deque(maxlen=40)  # the last lines of its output, for an error message
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        self._read("--ready")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def run(self):
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return float(self._read("--run").split()[1])

    def close(self):
        """Ends the process (end of its input); raises if it failed."""
        self.proc.stdin.close()
        self.log.extend(self.proc.stdout)
        if self.proc.wait() != 0:
            raise RuntimeError(self._failure(f"exited with {self.proc.returncode}"))

    def _read(self, tag):
        """The next output line that starts with `tag`."""
        for line in self.proc.stdout:
            if line.startswith(tag):
                return line
            self.log.append(line)
        self.proc.wait()
        raise RuntimeError(self._failure(f"ended before '{tag}' (exit code {self.proc.returncode})"))

    def _failure(self, what):
        return f"{self.label} {what}:\n{''.join(self.log).strip()}"


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

