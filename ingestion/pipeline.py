"""Any tf.data pipeline an ingestion optimizer can tune: a builder plus a knob space.

A :class:`PipelineSpec` is all an optimizer needs: ``build(config) -> tf.data.Dataset``
and the :class:`~ingestion.knobs.KnobSpace` it may search. The built-in DLRM pipeline
(:func:`ingestion.dlrm.dlrm_spec`) is one instance; a user's own pipeline is another::

    def build(config):
        ds = tf.data.Dataset.list_files("logs/*.csv").interleave(
            tf.data.TextLineDataset, num_parallel_calls=config["read"] or None)
        return ds.map(parse, num_parallel_calls=config["parse"] or None).batch(1024)

    spec = PipelineSpec("mine", build, space, rows_per_element=1024,
                        factory="mypkg.pipes:make_spec")

To measure in a separate worker process (so that the peak RSS is the pipeline's own
and a runaway configuration cannot take the tuner down), the worker has to rebuild the
spec: ``factory`` names an importable ``"module:function"`` that returns the spec when
called with ``factory_kwargs`` (JSON values only: nothing is pickled between processes).
A spec without a factory is measured in the tuner's own process.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypedDict

from ingestion.knobs import Config, KnobSpace
from core.errors import UserError
from core.json_edge import JsonObject

if TYPE_CHECKING:  # pragma: no cover
    import tensorflow as tf

Builder = Callable[[Config], "tf.data.Dataset"]
PrefixBuilder = Callable[[Config, str], "tf.data.Dataset"]
RowsPerElement = int | Callable[[Config], int] | None


@dataclass(frozen=True)
class PipelineSpec:
    """A tunable pipeline.

    ``rows_per_element``: rows in one element of the built dataset; an int, a function
    of the configuration (e.g. its batch size), or None to read it from each element's
    leading dimension (exact even when batches vary in size).
    ``autotunable``: knobs tf.data can tune itself (see :meth:`autotune_knobs`).
    ``stages`` and ``build_upto(config, stage)`` are optional: with them the measurement
    also times each prefix of the pipeline (per-stage throughput).
    """

    name: str
    build: Builder
    space: KnobSpace
    rows_per_element: RowsPerElement = None
    factory: str | None = None
    factory_kwargs: Mapping[str, Any] = field(default_factory=dict)
    stages: tuple[str, ...] = ()
    build_upto: PrefixBuilder | None = None
    autotunable: tuple[str, ...] | None = None

    def autotune_knobs(self) -> tuple[str, ...]:
        """Knobs the AUTOTUNE baseline sets to ``tf.data.AUTOTUNE`` (the builder must accept
        -1 for them). Default: every ``cpu`` knob and every prefetch-stage buffer."""
        if self.autotunable is not None:
            return self.autotunable
        return tuple(k.name for k in self.space.knobs if k.kind == "cpu" or (k.kind == "buffer" and k.stage == "prefetch"))

    def rows_in(self, config: Config) -> int | None:
        """Rows per element for ``config``, or None when read from each element."""
        r = self.rows_per_element
        if r is None:
            return None
        return int(r(config) if callable(r) else r)

    @property
    def portable(self) -> bool:
        """Whether a worker process can rebuild this spec from ``factory``."""
        return self.factory is not None

    def reference(self) -> SpecReference:
        """The JSON reference a worker process rebuilds the spec from."""
        if self.factory is None:
            raise ValueError(f"pipeline {self.name!r} has no factory; it can only be measured in-process")
        return {"factory": self.factory, "kwargs": dict(self.factory_kwargs)}


class SpecReference(TypedDict):
    """What a worker process rebuilds a spec from (:meth:`PipelineSpec.reference`): JSON."""

    factory: str  # "module:function"
    kwargs: JsonObject  # the factory's keyword arguments


def spec_from_reference(ref: SpecReference) -> PipelineSpec:
    """Import ``ref["factory"]`` ("module:function") and call it with ``ref["kwargs"]``."""
    factory = str(ref.get("factory", ""))
    module_name, _, func_name = factory.partition(":")
    if not module_name or not func_name:
        raise UserError(f"pipeline factory {factory!r} must look like 'package.module:function'")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import pipeline factory {factory!r}: {exc}") from exc
    spec = func(**dict(ref.get("kwargs", {})))
    if not isinstance(spec, PipelineSpec):
        raise UserError(f"pipeline factory {factory!r} returned {type(spec).__name__}, not a PipelineSpec")
    return spec
