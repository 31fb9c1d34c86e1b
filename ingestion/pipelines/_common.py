"""Helpers the suite's pipelines share: knob values, tf.data options and small data writers.

Every pipeline of the suite is written the way a user writes one with the public API
(:class:`~ingestion.pipeline.PipelineSpec` + :class:`~ingestion.knobs.KnobSpace`); these helpers
only save repeating the same three lines in each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from core.atomic import write_file, write_text
from core.errors import UserError
from ingestion.node import Node

if TYPE_CHECKING:  # pragma: no cover
    import tensorflow as tf

AUTOTUNE = -1  # tf.data.AUTOTUNE's value (the AUTOTUNE baseline sets tunable knobs to it)
MARKER = "_suite.json"


def parallelism(node: Node, *, inline: bool = True, cap: int | None = None) -> tuple[int, ...]:
    """Thread counts for one stage on ``node``: 0 (inline) if allowed, 1, 2, 4, ... up to the vCPUs."""
    top = max(1, min(node.vcpus, cap or node.vcpus))
    values = {1, top, *(v for v in (2, 4, 8, 16, 32, 64) if v <= top)}
    return tuple(sorted(values | ({0} if inline else set())))


def par(value: int) -> int | None:
    """A parallelism knob as tf.data wants it: 0 -> None (sequential), -1 -> AUTOTUNE."""
    import tensorflow as tf

    if value == AUTOTUNE:
        return tf.data.AUTOTUNE
    return None if int(value) == 0 else int(value)


def buffer(value: int) -> int:
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == AUTOTUNE else int(value)


def finish(ds: "tf.data.Dataset", config: Mapping[str, int], node: Node) -> "tf.data.Dataset":
    """Options every suite pipeline runs with: exactly as configured (autotune off, a private
    pool of the node's vCPUs), unless a knob is AUTOTUNE (the AUTOTUNE baseline: tf.data's
    default options, with the node's RAM budget)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = False
    if any(int(v) == AUTOTUNE for v in config.values()):
        options.autotune.ram_budget = int(node.ram_budget_mb * 2**20)
    else:
        options.autotune.enabled = False
        options.threading.private_threadpool_size = node.vcpus
    return ds.with_options(options)


def shard_files(data_dir: str | Path, suffix: str, pipeline: str) -> list[str]:
    """The data files of a suite pipeline, or a one-line error saying how to make them."""
    d = Path(data_dir)
    files = sorted(str(p) for p in d.glob(f"*{suffix}")) if d.is_dir() else []
    if not files:
        raise UserError(f"no *{suffix} files in {d} for pipeline {pipeline!r}; make them with "
                        f"`python -m benchmarks.intune_suite --gen-data` or the pipeline's generate()")
    return files


def write_shards(out: str | Path, name: str, suffix: str, shards: Iterable[Callable[[Path], None]],
                 facts: Mapping[str, int]) -> Path:
    """Write each shard with its writer (to a temporary name, then renamed) and a marker file
    with ``facts``; an existing complete directory is left as it is."""
    d = Path(out)
    if (d / MARKER).is_file():
        return d
    d.mkdir(parents=True, exist_ok=True)
    for i, write in enumerate(shards):
        write_file(d / f"part-{i:03d}{suffix}", write)  # a unique temporary name, then renamed
    write_text(d / MARKER, json.dumps({"pipeline": name, **facts}, indent=2))
    return d


def text_writer(lines: list[str]) -> Callable[[Path], None]:
    return lambda path: path.write_text("\n".join(lines) + "\n")  # a temporary file of write_file


def tfrecord_writer(records: Callable[[], Iterable[bytes]]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import tensorflow as tf

        with tf.io.TFRecordWriter(str(path)) as writer:
            for record in records():
                writer.write(record)

    return write


def det(value: int) -> bool | None:
    """``deterministic`` for a stage of parallelism ``value``: False when parallel, else unset."""
    return False if int(value) != 0 else None
