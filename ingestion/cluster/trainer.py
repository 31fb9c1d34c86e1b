"""A training job's demand, measured from its trainer: the rows/s at which it stops being input-bound.

A trainer is a step function: it is given one batch (a dict of NumPy arrays in the DLRM
pipeline's schema: ``dense`` float32 [B, 13], ``cat`` int64 [B, 26] hashed into the pipeline's
tables, ``label`` float32 [B]) and trains on it. Two kinds:

* ``dlrm``: the built-in DLRM-style trainer (torch on one thread: 26 embedding bags of 16
  dimensions sized as the pipeline's hash tables, a bottom MLP on the dense features, a top MLP;
  binary cross-entropy, SGD with sparse embedding gradients), :func:`dlrm_step`;
* ``module:function``: the user's own; ``function()`` returns the step function (a factory, so
  the trainer builds its model once), importable from ``PYTHONPATH``.

:func:`measure_demand` feeds the trainer synthetic in-memory batches that are always ready, so
every step is compute alone: its rows/s in each of ``repeats`` windows is the rate above which it
is never input-bound (fed faster, it cannot take more; fed slower, it waits). The demand is the
median window's rows/s times ``1 + margin`` (the safety margin, so ingestion that meets the demand
keeps the trainer fed through its spread), reported with the windows' relative spread.
:func:`wait_share_at` checks it from the other side: it paces the batches at a given rows/s and
measures the share of step time the trainer waits for its input.

:func:`train_on` is the trainer at work, in the live loop as in :func:`wait_share_at`: it steps on
the batches a source gives (``ingestion.cluster.service.Feed``: the tf.data service, prefetched)
and times each step's wait for its batch apart from the rest (:class:`TrainerReading`: steps/s,
rows/s, the input-wait share, and the rows/s it computes at when its batches are always ready).
"""

from __future__ import annotations

import importlib
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypedDict

import numpy as np

from core.errors import UserError
from core.json_edge import JsonObject

BUILTIN = "dlrm"
EMBEDDING_DIM = 16
LEARNING_RATE = 0.05
MARGIN = 0.05
Step = Callable[[dict[str, np.ndarray]], Any]


def dlrm_model(table_sizes: tuple[int, ...], dense: int = 13) -> Any:
    """The built-in DLRM-style model (torch)."""
    import torch
    from torch import nn

    class DLRM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tables = nn.ModuleList(nn.EmbeddingBag(n, EMBEDDING_DIM, mode="sum", sparse=True) for n in table_sizes)
            self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, EMBEDDING_DIM), nn.ReLU())
            self.top = nn.Sequential(nn.Linear(EMBEDDING_DIM * (len(table_sizes) + 1), 64), nn.ReLU(), nn.Linear(64, 1))

        def forward(self, x: "torch.Tensor", cat: "torch.Tensor") -> "torch.Tensor":
            parts = [self.bottom(x)] + [t(cat[:, i:i + 1]) for i, t in enumerate(self.tables)]
            return self.top(torch.cat(parts, dim=1)).squeeze(1)

    return DLRM()


def dlrm_step() -> Step:
    """The built-in trainer's step function: one SGD step of the DLRM-style model per batch."""
    import torch

    from ingestion.dlrm import DEFAULT_TABLE_SIZES

    torch.set_num_threads(1)
    model = dlrm_model(DEFAULT_TABLE_SIZES)
    sgd = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(batch: dict[str, np.ndarray]) -> float:
        x, cat = torch.from_numpy(batch["dense"]), torch.from_numpy(batch["cat"])
        loss = loss_fn(model(x, cat), torch.from_numpy(batch["label"]))
        sgd.zero_grad()
        loss.backward()
        sgd.step()
        return float(loss.detach())

    return step


def load_trainer(name: str) -> Step:
    """``dlrm`` or ``module:function`` (a factory returning the step function); one line on a mistake."""
    if name == BUILTIN:
        return dlrm_step()
    module_name, colon, attr = name.partition(":")
    if not colon or not module_name or not attr:
        raise UserError(f"--trainer {name!r}: give {BUILTIN} or module:function (a factory that returns a step function)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001  the user's module may fail in any way on import
        raise UserError(f"--trainer {name}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UserError(f"--trainer {name}: {module_name} has no function {attr!r}")
    try:
        step = factory()
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"--trainer {name}: {attr}() raised {type(exc).__name__}: {exc}") from None
    if not callable(step):
        raise UserError(f"--trainer {name}: {attr}() must return a step function, got {type(step).__name__}")
    return step


def synthetic_batches(batch_size: int, count: int = 8, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``count`` in-memory batches in the DLRM pipeline's schema (after its transform)."""
    from ingestion.dlrm import DEFAULT_TABLE_SIZES

    rng = np.random.default_rng(seed)
    sizes = np.array(DEFAULT_TABLE_SIZES)
    return [{"dense": np.log1p(rng.exponential(10.0, (batch_size, 13))).astype(np.float32),
             "cat": (rng.random((batch_size, len(sizes))) * sizes).astype(np.int64),
             "label": (rng.random(batch_size) < 0.25).astype(np.float32)} for _ in range(count)]


def _step(step: Step, batch: dict[str, np.ndarray], name: str) -> None:
    try:
        step(batch)
    except Exception as exc:  # noqa: BLE001  the user's trainer may fail in any way
        raise UserError(f"trainer {name} crashed on a batch of {len(batch['label'])} rows "
                        f"({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class Demand:
    """A trainer's measured demand (rows/s, margin included) and how it was measured."""

    trainer: str
    demand_rows_per_s: float
    compute_rows_per_s: float  # median window, batches always ready
    windows_rows_per_s: tuple[float, ...]
    spread: float  # relative standard deviation of the windows
    margin: float
    batch_size: int
    label: str = "measured"

    def to_json(self) -> JsonObject:
        return {"trainer": self.trainer, "demand_rows_per_s": self.demand_rows_per_s,
                "compute_rows_per_s": self.compute_rows_per_s, "windows_rows_per_s": list(self.windows_rows_per_s),
                "spread": self.spread, "margin": self.margin, "batch_size": self.batch_size, "label": self.label}


def measure_demand(trainer: str, *, batch_size: int = 1024, seconds: float = 3.0, repeats: int = 3,
                   warmup_steps: int = 3, margin: float = MARGIN, step: Step | None = None) -> Demand:
    """The trainer's demand (see the module docstring); ``step`` overrides loading ``trainer``."""
    step = step or load_trainer(trainer)
    batches = synthetic_batches(batch_size)
    for i in range(warmup_steps):
        _step(step, batches[i % len(batches)], trainer)
    windows = []
    for _ in range(repeats):
        rows, started, i = 0, time.perf_counter(), 0
        while (elapsed := time.perf_counter() - started) < seconds or rows == 0:
            _step(step, batches[i % len(batches)], trainer)
            rows, i = rows + batch_size, i + 1
        windows.append(rows / (time.perf_counter() - started))
    median = statistics.median(windows)
    spread = statistics.stdev(windows) / statistics.mean(windows) if len(windows) > 1 else 0.0
    return Demand(trainer, median * (1 + margin), median, tuple(windows), spread, margin, batch_size)


class TrainerFigures(TypedDict):
    """A :class:`TrainerReading` as the JSON has it (every figure measured)."""

    label: str
    steps: int
    rows: int
    seconds: float
    steps_per_s: float
    rows_per_s: float
    compute_rows_per_s: float
    input_wait_share: float


def _ratio(part: float, whole: float, empty: float = 0.0) -> float:
    """``part / whole``, or ``empty`` for a window with no time in it."""
    return part / whole if whole > 0 else empty


@dataclass(frozen=True)
class TrainerReading:
    """What a trainer did in a measuring window: its steps and rows, the time it waited for its next
    batch (``wait_s``, input wait) and the time of the rest of its steps (``compute_s``); the rows it
    took from each source (``rows_by_source``, a reader's name and its rows)."""

    steps: int
    rows: int
    wait_s: float
    compute_s: float
    rows_by_source: tuple[tuple[str, int], ...] = ()

    @property
    def seconds(self) -> float:
        return self.wait_s + self.compute_s

    @property
    def steps_per_s(self) -> float:
        return _ratio(self.steps, self.seconds)

    @property
    def rows_per_s(self) -> float:
        return _ratio(self.rows, self.seconds)

    @property
    def compute_rows_per_s(self) -> float:
        """The rows/s the trainer would take with its batches always ready: its rows over its compute time."""
        return _ratio(self.rows, self.compute_s)

    @property
    def input_wait_share(self) -> float:
        """The share of step time spent waiting for the next batch (1.0 when no batch came at all)."""
        return _ratio(self.wait_s, self.seconds, empty=1.0)

    def to_json(self) -> TrainerFigures:
        return {"label": "measured", "steps": self.steps, "rows": self.rows, "seconds": self.seconds,
                "steps_per_s": self.steps_per_s, "rows_per_s": self.rows_per_s,
                "compute_rows_per_s": self.compute_rows_per_s, "input_wait_share": self.input_wait_share}


#: A trainer's input: the next batch and the name of the source it came from, or None once the input ended.
NextBatch = Callable[[], tuple[str, dict[str, np.ndarray]] | None]


def train_on(next_batch: NextBatch, step: Step, *, seconds: float, warmup_s: float = 0.0,
             name: str = "trainer") -> TrainerReading:
    """Run ``step`` on the batches ``next_batch`` gives for ``seconds`` after ``warmup_s`` (or until
    the input ends), timing each step's wait for its batch apart from the rest of the step."""
    started = time.perf_counter()
    steps = rows = 0
    wait = busy = 0.0
    by_source: dict[str, int] = {}
    while True:
        t0 = time.perf_counter()
        item = next_batch()
        t1 = time.perf_counter()
        counted = t0 - started >= warmup_s
        if item is None:
            wait += t1 - t0 if counted else 0.0  # the trainer waited for a batch that never came
            break
        source, batch = item
        _step(step, batch, name)
        t2 = time.perf_counter()
        if not counted:
            continue
        n = len(next(iter(batch.values())))
        steps, rows, wait, busy = steps + 1, rows + n, wait + t1 - t0, busy + t2 - t1
        by_source[source] = by_source.get(source, 0) + n
        if t2 - started >= warmup_s + seconds:
            break
    return TrainerReading(steps, rows, wait, busy, tuple(sorted(by_source.items())))


def wait_share_at(step: Step, rows_per_s: float, *, batch_size: int = 1024, seconds: float = 3.0,
                  name: str = "trainer") -> float:
    """The share of step time the trainer waits for input when its batches arrive at ``rows_per_s``
    (a feeder thread releases one batch every ``batch_size / rows_per_s`` seconds, as a paced source)."""
    import queue

    batches = synthetic_batches(batch_size)
    ready: queue.Queue[dict[str, np.ndarray]] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def feed() -> None:
        due, k = time.perf_counter(), 0
        while not stop.is_set():
            due += batch_size / rows_per_s
            time.sleep(max(0.0, due - time.perf_counter()))
            try:
                ready.put(batches[k % len(batches)], timeout=1.0)
            except queue.Full:
                due = time.perf_counter()  # the trainer is behind: the source does not bank time
            k += 1

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        return train_on(lambda: ("paced", ready.get()), step, seconds=seconds, name=name).input_wait_share
    finally:
        stop.set()
        feeder.join()


def resolve_demands(spec: Any, measure: Callable[[str], Demand] | None = None) -> tuple[Any, dict[str, Demand]]:
    """The jobs file with every ``demand_rows_per_s: measure`` replaced by its trainer's measured demand
    (each trainer measured once), and the measurements per job."""
    measure = measure or (lambda name: measure_demand(name))
    by_trainer: dict[str, Demand] = {}
    measured: dict[str, Demand] = {}
    jobs = []
    for job in spec.jobs:
        if job.demand_rows_per_s == "measure":
            if job.trainer not in by_trainer:
                by_trainer[job.trainer] = measure(job.trainer)
            measured[job.name] = by_trainer[job.trainer]
            job = job.model_copy(update={"demand_rows_per_s": measured[job.name].demand_rows_per_s})
        jobs.append(job)
    return spec.model_copy(update={"jobs": jobs}), measured
