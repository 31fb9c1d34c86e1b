"""Small helpers shared by the benchmarks: timing, machine load, tables, ratios.

Sums and means over seeds with a bootstrap interval come from
:func:`optimizers.seraph.stats.bootstrap_interval`; :func:`fmt_interval` prints one.

Kept generic on purpose (no RL or ingestion knowledge here) so every benchmark in
``benchmarks/`` can print the same kind of table and record the same facts about
the machine it ran on. Timing runs are expected to be launched under
``flock /tmp/trainwise-bench.lock`` (see each benchmark's docstring); this module
cannot enforce that, but :func:`machine_state` records the load average before and
after a measurement so a result taken on a busy machine shows it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_LOCK = "/tmp/trainwise-bench.lock"


@dataclass
class Stopwatch:
    """Measured wall-clock seconds of a ``with`` block (``time.perf_counter``)."""

    seconds: float = 0.0
    _start: float = field(default=0.0, repr=False)

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def machine_state() -> dict[str, Any]:
    """Load averages (1, 5, 15 min) and CPU count: how busy the box was."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1m": round(one, 2), "loadavg_5m": round(five, 2), "loadavg_15m": round(fifteen, 2),
            "cpu_count": os.cpu_count()}


@contextmanager
def recording_load(into: dict[str, Any]) -> Iterator[None]:
    """Store the machine state before and after the block in ``into``."""
    into["load_before"] = machine_state()
    try:
        yield
    finally:
        into["load_after"] = machine_state()


def set_torch_threads(n: int) -> dict[str, int]:
    """Give torch ``n`` intra-op threads (and 1 inter-op thread); return what took effect.

    Called once per process before any framework runs, so every framework measured in
    that process gets the same setting.
    """
    import torch

    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already started
        pass
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def repo_path(path: Any) -> str:
    """``path`` relative to the repository when it lies inside it (result files name no machine's paths)."""
    root = Path(__file__).resolve().parents[1]
    resolved = Path(path).resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` rounded to 3 places, or None when either is missing or 0."""
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def fmt(value: Any, digits: int = 1) -> str:
    """Human formatting for table cells: thousands separators, fixed decimals, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def fmt_interval(interval: Any, digits: int = 1) -> str:
    """A table cell for an :class:`optimizers.seraph.stats.Interval`: ``12.3 [10.1, 14.2]``, or
    the estimate alone when there is no interval (one seed); '-' for None."""
    if interval is None:
        return "-"
    if interval.low is None or interval.high is None:
        return fmt(interval.estimate, digits)
    return f"{fmt(interval.estimate, digits)} [{fmt(interval.low, digits)}, {fmt(interval.high, digits)}]"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None,
                digits: int = 1, stream: Any = None) -> None:
    """Print a plain-text table with right-aligned numeric columns."""
    stream = stream or sys.stdout
    cells = [[fmt(v, digits) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric))

    if title:
        print(title, file=stream)
    print(line(headers), file=stream)
    print("  ".join("-" * w for w in widths), file=stream)
    for row in cells:
        print(line(row), file=stream)
    stream.flush()


def progress(message: str) -> None:
    """One line of progress on stderr (keeps stdout for the result table)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_result(path: Any, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to ``path`` (atomically, with the environment) when a path is given."""
    if path is None:
        return
    from core.results import write_json

    write_json(path, payload)
    progress(f"wrote {path}")


# --- Bootstrap intervals over seeds (the Seraph bill benchmarks) ---------------------------
# A seed is the unit a user pays for, so a figure over seeds (a sum, a mean, a median, a ratio
# of two methods' sums on the same seeds) gets a percentile bootstrap interval that resamples
# seeds, with replacement, through scipy.stats.bootstrap. Two methods run on the same seeds
# are resampled together (paired). The percentile method, not BCa: with 3 to 10 seeds BCa's
# acceleration estimate is unstable and it returns NaN when every resample is equal. The
# resampling is seeded, so a result re-scored later gets the same interval.

BOOTSTRAP_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class Interval:
    """A statistic over ``n`` seeds and its bootstrap interval (``low``, ``high``)."""

    estimate: float
    low: float
    high: float
    n: int
    confidence: float = BOOTSTRAP_CONFIDENCE

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n": self.n,
                "confidence": self.confidence, "method": "percentile bootstrap over seeds"}

    def text(self, digits: int = 3) -> str:
        return f"{self.estimate:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def sum_ratio(x: Any, y: Any, axis: int = -1) -> Any:
    """sum(x) / sum(y): one method's bill over another's on the same seeds (a ratio of means too)."""
    import numpy as np

    return np.sum(x, axis=axis) / np.sum(y, axis=axis)


def median_ratio(x: Any, y: Any, axis: int = -1) -> Any:
    """median(x) / median(y) on the same seeds."""
    import numpy as np

    return np.median(x, axis=axis) / np.median(y, axis=axis)


def seed_mean(x: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.mean(x, axis=axis)


def bootstrap_interval(statistic: Any, *samples: Sequence[float], seed: int = 0,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> Interval | None:
    """``statistic(*samples)`` with its bootstrap interval over seeds; the samples are paired (the
    i-th value of each is the same seed). ``statistic`` takes arrays and an ``axis`` (see
    :func:`sum_ratio`). None with fewer than 2 seeds, or when a sample is empty or unequal in length."""
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    data = [np.asarray(s, dtype=float) for s in samples]
    n = len(data[0]) if data else 0
    if n < 2 or any(len(d) != n for d in data):
        return None
    estimate = float(statistic(*data, axis=-1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate sample (every seed equal) gives low == high
        res = bootstrap(tuple(data), statistic, n_resamples=resamples, paired=len(data) > 1, vectorized=True,
                        confidence_level=BOOTSTRAP_CONFIDENCE, method="percentile", rng=np.random.default_rng(seed))
    ci = res.confidence_interval
    return Interval(estimate, float(ci.low), float(ci.high), n)
