"""Following one request into each engine's job object: how often the path re-enters a file.

The measure (docs/architecture.md, "Following one request"):

- A **stop** is a call into a library file (``core``, ``serverless``, ``ingestion``,
  ``optimizers``) from a different file: the file of the nearest enclosing library frame
  differs, or there is none (the request enters the library). Calls within a file are not
  stops, and neither is coming back from a callee to its caller.
- Not counted: ``<module>`` frames (imports), comprehension and generator-expression frames
  (they run inside the file that defines them), and the checks of frozen values
  (``__post_init__``): these three with everything they call.
- A **return** is a stop into a file that an earlier stop already entered.

Each engine's construction is traced with :func:`sys.setprofile`: Seraph's
``SeraphJob.of(request)`` for ``trainwise rl tune --env CartPole-v1 --target-reward 475``,
InTune's ``IngestJob`` for ``trainwise ingest tune --data DIR --optimizer intune`` (the shards
listed, then ``request.job(...)``: the node, the pipeline, the budget), and InTuneX's cluster model for ``trainwise ingest cluster --local-nodes 2 --jobs
configs/cluster-local.yaml`` (the request's jobs file read and validated, then the model of two
one-CPU local nodes the live loop plans on; the live run itself is not traced). Each
engine's returns stay at or under its ceiling; a new round trip fails the test with every
stop listed. Run this module to print the stops::

    PYTHONPATH=. .venv/bin/python -m tests.test_request_path
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("core", "serverless", "ingestion", "optimizers")
#: Frames that are no stop but run inside the file that defines them.
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
#: Frames left out with everything they call: imports and the checks of frozen values.
UNCOUNTED = frozenset({"<module>", "__post_init__"})
#: The most returns each engine's construction may make (lower it when you remove one).
SERAPH_RETURNS_CEILING = 6
INTUNE_RETURNS_CEILING = 1
INTUNEX_RETURNS_CEILING = 1


class Stop(NamedTuple):
    """A call into ``file`` (relative to the repository) at the function ``name``."""

    file: str
    name: str


class Event(NamedTuple):
    """One profiler event: ``kind`` is ``"call"`` or ``"return"``."""

    kind: str
    filename: str
    name: str


def library_file(filename: str, root: Path = ROOT, packages: tuple[str, ...] = LIBRARY) -> str | None:
    """``filename`` relative to ``root`` when it lies in one of ``packages``, else None."""
    try:
        rel = Path(filename).resolve().relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in packages else None


def stops_in(events: Iterable[Event], library: Callable[[str], str | None] = library_file) -> list[Stop]:
    """The stops of a sequence of call and return events (the module's docstring)."""
    stops: list[Stop] = []
    stack: list[tuple[str | None, bool]] = [(None, False)]  # (file of the nearest library frame, uncounted)
    for kind, filename, name in events:
        if kind == "return":
            if len(stack) > 1:
                stack.pop()
            continue
        here, uncounted = stack[-1]
        rel = library(filename)
        uncounted = uncounted or name in UNCOUNTED
        if rel is not None and rel != here and not uncounted and name not in COMPREHENSIONS:
            stops.append(Stop(rel, name))
        stack.append((here if rel is None else rel, uncounted))
    return stops


def returns_in(stops: list[Stop]) -> list[Stop]:
    """The stops into a file an earlier stop entered."""
    seen: set[str] = set()
    out = []
    for stop in stops:
        if stop.file in seen:
            out.append(stop)
        seen.add(stop.file)
    return out


def traced(call: Callable[[], Any]) -> tuple[Any, list[Event]]:
    """``call()``'s value and the Python call and return events it made."""
    events: list[Event] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event in ("call", "return"):
            events.append(Event(event, frame.f_code.co_filename, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        value = call()
    finally:
        sys.setprofile(None)
    return value, events


def report(engine: str, stops: list[Stop]) -> str:
    """The stops, numbered, each return marked: the text a failed ceiling shows."""
    back = returns_in(stops)
    files = {s.file for s in stops}
    lines = [f"{engine}: {len(stops)} stops in {len(files)} files, {len(back)} returns to a file entered before"]
    seen: set[str] = set()
    for i, stop in enumerate(stops, 1):
        lines.append(f"  {i:2d} {'return ' if stop.file in seen else '       '}{stop.file}:{stop.name}")
        seen.add(stop.file)
    return "\n".join(lines)


def seraph_job() -> Any:
    """The ``SeraphJob`` of ``rl tune --env CartPole-v1 --target-reward 475`` (the request made before tracing)."""
    from optimizers.seraph.job import SeraphJob
    from optimizers.seraph.request import SeraphRequest

    request = SeraphRequest(env_id="CartPole-v1", target_reward=475.0, objective="cost")
    SeraphJob.of(request)  # imports done once, outside the trace
    return traced(lambda: SeraphJob.of(request))


def intune_job(data: Path) -> Any:
    """The ``IngestJob`` of ``ingest tune --data DATA --optimizer intune`` (the request made before
    tracing): its shards listed, then the job over them, as ``trainwise.cli.ingest_tune`` makes it."""
    from ingestion.dlrm import list_shards
    from optimizers.ingest_request import IngestRequest

    request = IngestRequest(data=str(data), optimizer="intune")

    def build() -> Any:
        shards, fmt = list_shards(data, request.format)
        return request.job(str(data), fmt, shards)

    build()  # imports done once, outside the trace
    return traced(build)


def _data(folder: Path) -> Path:
    """A small folder of Criteo-format TSV shards."""
    from ingestion import datagen

    if not folder.is_dir():
        datagen.generate(1_000, "tsv", folder, shards=2)
    return folder


def intunex_cluster() -> Any:
    """The cluster model of ``ingest cluster --local-nodes 2 --jobs configs/cluster-local.yaml``.

    The real pipeline's calibration (``ingestion.cluster.pipelines.real_pipeline``, cached per
    process after its first call, about a minute the first time) is stood in for by a stub: a
    cached call enters no library file, and neither does the stub."""
    from optimizers.intunex.live import local_cluster
    from optimizers.intunex.request import ClusterRequest

    jobs = ROOT / "configs" / "cluster-local.yaml"
    request = ClusterRequest(jobs=str(jobs))  # made before the trace, as Seraph's request is

    def build() -> Any:
        return local_cluster(request.load_jobs(), 2, jobs.parent, cpus=1)

    calibrated = SimpleNamespace(calibration=SimpleNamespace(model="the calibrated pipeline"))
    with mock.patch("ingestion.cluster.pipelines.real_pipeline", lambda _name: calibrated):
        build()  # imports done once, outside the trace
        return traced(build)


# -- the counter on synthetic call sequences ------------------------------------------------

def _calls(*steps: str) -> list[Event]:
    """Events from a compact script: ``"a.py:f"`` calls f in a.py, ``"<"`` returns from the last call."""
    return [Event("return", "", "") if s == "<" else Event("call", s.split(":")[0], s.split(":")[1]) for s in steps]


def _lib(filename: str) -> str | None:
    return filename if filename.endswith(".py") and not filename.startswith("ext") else None


def test_a_round_trip_into_a_file_left_before_is_a_return():
    # job.py calls a.py twice (a return), a.py calls b.py once
    events = _calls("job.py:of", "a.py:f", "b.py:g", "<", "<", "a.py:h", "<", "<")
    stops = stops_in(events, _lib)
    assert stops == [Stop("job.py", "of"), Stop("a.py", "f"), Stop("b.py", "g"), Stop("a.py", "h")]
    assert returns_in(stops) == [Stop("a.py", "h")]


def test_calls_within_a_file_and_the_way_back_to_the_caller_are_no_stops():
    events = _calls("job.py:of", "job.py:helper", "a.py:f", "a.py:f2", "<", "<", "<", "job.py:other", "<", "<")
    assert returns_in(stops_in(events, _lib)) == []


def test_imports_comprehensions_and_value_checks_are_left_out():
    events = _calls(
        "job.py:of",
        "a.py:<module>", "b.py:g", "<", "<",            # an import and what it runs
        "c.py:__post_init__", "b.py:check", "<", "<",   # a frozen value's check and what it calls
        "job.py:<listcomp>", "d.py:f", "<", "<",        # a comprehension: its calls are job.py's
        "<",
    )
    assert stops_in(events, _lib) == [Stop("job.py", "of"), Stop("d.py", "f")]


def test_frames_outside_the_library_pass_the_caller_through():
    # a.py calls a stdlib helper that calls back into a.py: no stop; into b.py: a stop
    events = _calls("a.py:f", "ext/dataclasses.py:replace", "a.py:g", "<", "b.py:h", "<", "<", "<")
    assert stops_in(events, _lib) == [Stop("a.py", "f"), Stop("b.py", "h")]


def test_the_tracer_sees_a_round_trip_in_real_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Two tiny modules written to disk: ``job.of`` goes to ``a`` twice, so one return."""
    pkg = tmp_path / "roundtrip"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    (pkg / "job.py").write_text(
        "from roundtrip import a\n\ndef of():\n    return [a.f(), a.g(), *(x for x in (3,))]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import roundtrip.job as job  # the module written above

    value, events = traced(job.of)
    stops = stops_in(events, lambda f: library_file(f, tmp_path, ("roundtrip",)))
    assert value == [1, 2, 3]
    assert stops == [Stop("roundtrip/job.py", "of"), Stop("roundtrip/a.py", "f"), Stop("roundtrip/a.py", "g")]
    assert returns_in(stops) == [Stop("roundtrip/a.py", "g")]


# -- the three engines ----------------------------------------------------------------------

def test_making_a_seraph_job_returns_to_few_files():
    job, events = seraph_job()
    stops = stops_in(events)
    assert job.layout.steps_per_env > 0 and stops[0] == Stop("optimizers/seraph/job.py", "of")
    assert len(returns_in(stops)) <= SERAPH_RETURNS_CEILING, report("Seraph", stops)


def test_making_an_intune_job_returns_to_few_files(tmp_path: Path):
    job, events = intune_job(_data(tmp_path / "d"))
    stops = stops_in(events)
    assert job.spec.name == "dlrm-tsv" and stops[0] == Stop("ingestion/dlrm.py", "list_shards")
    assert len(returns_in(stops)) <= INTUNE_RETURNS_CEILING, report("InTune", stops)


def test_making_an_intunex_cluster_returns_to_few_files():
    cluster, events = intunex_cluster()
    stops = stops_in(events)
    assert [j.name for j in cluster.jobs] == ["ctr-small", "ads-medium"] and cluster.max_nodes == 2
    assert stops[:2] == [Stop("optimizers/intunex/request.py", "load_jobs"), Stop("ingestion/cluster/jobs.py", "load_jobs")]
    assert len(returns_in(stops)) <= INTUNEX_RETURNS_CEILING, report("InTuneX", stops)


if __name__ == "__main__":
    print(report("Seraph (SeraphJob.of)", stops_in(seraph_job()[1])))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(report("InTune (request.job(...))", stops_in(intune_job(_data(Path(tmp) / "d"))[1])))
    print(report("InTuneX (local_cluster(request.load_jobs(), 2))", stops_in(intunex_cluster()[1])))
