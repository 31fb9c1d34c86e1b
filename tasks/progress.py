"""A Prefect progress artifact that long tasks update as they go.

Training and tuning call :meth:`Progress.update` from the library's callback; the
artifact is updated in place (at most once every ``min_interval_s`` unless the
figure reached 100 %), so the Prefect UI shows how far a run has got without
flooding the API.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable
from uuid import UUID

from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.logging import get_run_logger
from serverless.rollout_event import RolloutEvent


class Progress:
    """One progress artifact (0-100 %) with a description of where the run is."""

    def __init__(self, key: str, description: str, min_interval_s: float = 2.0) -> None:
        self.key = key
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self._shown = -1.0
        self.id: UUID | None = create_progress_artifact(progress=0.0, key=key, description=description)

    def update(self, fraction: float, description: str) -> None:
        """Set progress to ``fraction`` (0..1); throttled."""
        percent = max(0.0, min(100.0, 100.0 * fraction))
        now = time.monotonic()
        if percent < 100.0 and now - self._last < self.min_interval_s:
            return
        if percent == self._shown and percent >= 100.0:
            return
        self._last, self._shown = now, percent
        if self.id is None:
            return
        try:
            update_progress_artifact(artifact_id=self.id, progress=percent, description=description)
        except Exception as exc:  # a progress display must never fail a training run
            get_run_logger().debug("progress artifact %s not updated: %s", self.key, exc)

    def done(self, description: str) -> None:
        self._last = 0.0
        self.update(1.0, description)


class ReportingBackend:
    """A function backend that reports each batch of rollouts, then delegates.

    Wraps any backend of the ``serverless.backends`` interface (``invoke``/``close``),
    so a training run shows progress without the trainer knowing about Prefect: after
    every batch it calls ``on_batch(env_steps_so_far, mean_recent_return)``, the mean
    over the last ``window`` finished episodes (the trainer's own "reached" window).
    """

    def __init__(self, inner: Any, on_batch: Callable[[int, float | None], None], window: int = 20) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "backend")
        self.on_batch = on_batch
        self.env_steps = 0
        self.returns: deque[float] = deque(maxlen=window)

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> Any:
        batch = self.inner.invoke(events, memory_mb, concurrency)
        for inv in batch.invocations:
            if inv.result:
                self.env_steps += int(inv.result.get("env_steps", 0))
                self.returns.extend(float(r) for r in inv.result.get("episode_returns", []))
        mean = sum(self.returns) / len(self.returns) if self.returns else None
        try:
            self.on_batch(self.env_steps, mean)
        except Exception:  # progress display must never break training
            pass
        return batch

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, item: str) -> Any:  # anything else the trainer asks of the backend
        return getattr(self.inner, item)


class ReportingWorker:
    """A pipeline measurement worker (``ingestion.measure.MeasureWorker``) that reports
    each measurement, then returns it: ``on_measure(measurement)``. Like
    :class:`ReportingBackend`, it lets a tuning run show progress while the library
    stays unaware of Prefect."""

    def __init__(self, inner: Any, on_measure: Callable[[Any], None]) -> None:
        self.inner = inner
        self.on_measure = on_measure

    def measure(self, config: Any, **kwargs: Any) -> Any:
        m = self.inner.measure(config, **kwargs)
        try:
            self.on_measure(m)
        except Exception:  # progress display must never break tuning
            pass
        return m

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)
