"""Hostile input, property-based (hypothesis): every input either works or is refused with a
one-line error naming the field or flag; never a traceback, never a half-written result file.

Covered: the workload YAML loader (optimizers.spec), the arguments of every CLI command
(trainwise.cli.main), knob spaces (ingestion.knobs), saved Seraph profiles
(optimizers.seraph.workload_profile) and price tables (serverless.pricing). Checkpoints are
covered through the trainer's public resume path in tests/serverless/test_checkpoint_hostile.py.

The CLI properties replace each command's job (training, tuning, measuring, the flows) with
a stand-in that raises ``ReachedJob``: an input that passes every check reaches the job, and
the property is about the checks, not about running the job.
"""

from __future__ import annotations

import json
import math
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import UserError
from ingestion.knobs import Knob, KnobSpace
from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise, load_profile, profile_path
from optimizers.spec import WorkloadSpec, load_spec, parse_spec
from serverless.pricing import PriceTable

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ---------------------------------------------------------------------------------------------
# values: JSON/YAML-like data with the field names the loaders know, and hostile scalars

FIELD_NAMES = [
    "name", "rl", "ingestion", "concurrency", "cache", "env_id", "target_reward", "max_steps", "backend",
    "architecture", "objective", "weight", "deadline_s", "budget_usd", "retune", "replan_every", "baselines",
    "seed", "data", "path", "rows", "cpu_budget", "optimizer", "time_budget_s", "verify_window_s",
    "verify_repeats", "batch_size", "profile_window_s", "profile_ttl_hours", "target_reword",
    "steps_per_env", "inject_faults", "baseline_config", "env_kwargs", "backend_options",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["CartPole-v1", "cost", "local", "x86_64", "autotune", "intune", "demo", "-1", "1e400"]),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=6)),
    max_leaves=25,
)


def _one_line(message: str) -> None:
    assert "\n" not in message.strip(), f"a multi-line error: {message!r}"
    assert "Traceback" not in message


def _plausible_workload() -> st.SearchStrategy[dict[str, Any]]:
    """Near-valid workloads: a good one with one field replaced by a hostile value."""
    good = {"name": "demo", "rl": {"env_id": "CartPole-v1", "target_reward": 150},
            "ingestion": {"data": {"rows": 50_000}, "time_budget_s": 30, "baselines": ["autotune"]}}
    paths = [("name",), ("concurrency",), ("rl", "target_reward"), ("rl", "max_steps"), ("rl", "weight"),
             ("rl", "deadline_s"), ("rl", "env_id"), ("rl", "seed"), ("rl", "baselines"), ("rl", "steps_per_env"),
             ("rl", "inject_faults"), ("rl", "baseline_config"), ("rl", "replan_every"), ("ingestion", "time_budget_s"),
             ("ingestion", "data", "rows"), ("ingestion", "baselines"), ("ingestion", "cpu_budget"),
             ("cache", "profile_ttl_hours")]

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        doc = json.loads(json.dumps(good))
        path = draw(st.sampled_from(paths))
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = draw(documents)
        return doc

    return build()


# ---------------------------------------------------------------------------------------------
# the workload YAML loader


def _check_spec_outcome(path: Path) -> WorkloadSpec | None:
    try:
        spec = load_spec(path)
    except UserError as exc:
        _one_line(str(exc))
        assert str(exc).startswith(str(path)), "the error names the file"
        return None
    assert isinstance(spec, WorkloadSpec)
    return spec


@FAST
@given(doc=st.one_of(documents, _plausible_workload()))
def test_any_yaml_document_loads_or_is_refused_with_one_line_naming_the_field(doc: Any, tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    spec = _check_spec_outcome(path)
    if spec is not None:  # accepted: every number in it is finite
        dumped = json.dumps(spec.model_dump(mode="json"))
        assert "NaN" not in dumped and "Infinity" not in dumped


@FAST
@given(doc=_plausible_workload())
def test_a_bad_field_is_named_in_the_error(doc: dict[str, Any]) -> None:
    try:
        parse_spec(doc, "w.yaml")
    except UserError as exc:
        message = str(exc)
        _one_line(message)
        # "w.yaml: invalid workload spec: rl.target_reward: ..." or "... needs an 'rl' section"
        assert any(f in message for f in FIELD_NAMES + ["(top level)"]), message


@FAST
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
       raw=st.binary(max_size=64))
def test_any_text_or_bytes_loads_or_is_refused(text: str, raw: bytes, tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(text, encoding="utf-8")
    _check_spec_outcome(path)
    path.write_bytes(raw)
    _check_spec_outcome(path)


def test_yaml_edge_cases_are_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    for text, needle in [("a: 2001-13-45", "not valid YAML"), ("rl: {target_reward: .nan}", "rl.target_reward"),
                         ("rl: {target_reward: 1, deadline_s: .inf}", "rl.deadline_s"), ("[", "line 1")]:
        path.write_text(text)
        with pytest.raises(UserError, match=needle.replace(".", r"\.")):
            load_spec(path)
    path.write_bytes(b"\xff\xfe rl:")
    with pytest.raises(UserError, match="not UTF-8"):
        load_spec(path)


# ---------------------------------------------------------------------------------------------
# knob spaces

knob_values = st.one_of(
    st.lists(st.integers(-5, 64), max_size=5).map(tuple),
    st.lists(st.one_of(st.integers(-5, 64), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3)), max_size=4),
)


@st.composite
def knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "name": draw(st.one_of(st.sampled_from(["a", "b", "c"]), st.text(max_size=3), st.integers())),
        "values": draw(knob_values),
        "kind": draw(st.sampled_from(["cpu", "buffer", "other", "gpu"])),
        "default": draw(st.one_of(st.none(), st.integers(-5, 64), st.floats(allow_nan=True))),
    }


@FAST
@given(specs=st.lists(knobs(), max_size=4), budget=st.one_of(st.integers(-3, 64), st.floats(allow_nan=True)),
       config=st.dictionaries(st.sampled_from(["a", "b", "c", "z"]),
                              st.one_of(st.integers(-5, 64), st.floats(allow_nan=True), st.booleans(), st.text(max_size=2)),
                              max_size=4))
def test_knob_spaces_are_built_and_configs_checked_or_refused_by_name(
    specs: list[dict[str, Any]], budget: Any, config: dict[str, Any]
) -> None:
    try:
        space = KnobSpace(tuple(Knob(**s) for s in specs), cpu_budget=budget)
    except UserError as exc:
        _one_line(str(exc))
        return
    initial = space.initial()
    assert space.validate(initial) == initial  # the initial configuration is always valid
    for neighbour in space.neighbours(initial):
        assert space.is_valid(neighbour)
    try:
        clean = space.validate(config)
    except UserError as exc:
        _one_line(str(exc))
        assert "knob" in str(exc) or "CPU budget" in str(exc)
        assert not space.is_valid(config)
    else:
        assert set(clean) == set(space.names) and space.cpu_used(clean) <= space.cpu_budget


# ---------------------------------------------------------------------------------------------
# saved Seraph profiles

WORKLOAD = {"env_id": "CartPole-v1", "architecture": "x86_64"}


def _good_profile() -> dict[str, Any]:
    from core.paths import hardware_fingerprint

    observation = {"shape": {"actors": 2, "memory_mb": 1769, "batch": 512}, "rollout_s": 0.5, "billed_s": 0.4,
                   "learner_s": 0.1, "iteration_s": 0.6, "cold": False, "rollout_only": False, "learner_only": False,
                   "duration_s": None}
    profile = Profile(WORKLOAD, "local", hardware_fingerprint(), [], ProfileNoise(b_noise=100.0), PilotSummary(env_steps=512), [1769])
    d = profile.as_dict()
    d["observations"] = [observation]
    return d


@st.composite
def damaged_profiles(draw: st.DrawFn) -> Any:
    d = _good_profile()
    where = draw(st.sampled_from(["top", "observation", "shape", "noise", "whole"]))
    value = draw(documents)
    if where == "whole":
        return value
    target = {"top": d, "observation": d["observations"][0], "shape": d["observations"][0]["shape"],
              "noise": d["noise"]}[where]
    target[draw(st.sampled_from(sorted(target)))] = value
    return d


@FAST
@given(content=damaged_profiles())
def test_a_damaged_profile_is_ignored_or_read_with_sane_numbers(content: Any, tmp_path: Path) -> None:
    path = profile_path(WORKLOAD, "local", tmp_path)
    path.write_text(json.dumps(content))
    prof = load_profile(WORKLOAD, "local", tmp_path)
    if prof is None:
        return  # profiled again
    for o in prof.observations:
        assert min(o.shape.actors, o.shape.memory_mb, o.shape.batch) >= 1
        assert all(math.isfinite(v) and v >= 0 for v in (o.rollout_s, o.billed_s, o.learner_s, o.iteration_s))
    assert prof.b_noise is None or math.isfinite(prof.b_noise)


def test_the_undamaged_profile_loads(tmp_path: Path) -> None:
    profile_path(WORKLOAD, "local", tmp_path).write_text(json.dumps(_good_profile()))
    prof = load_profile(WORKLOAD, "local", tmp_path)
    assert prof is not None and prof.observations[0].shape.batch == 512


# ---------------------------------------------------------------------------------------------
# price tables


def _good_prices() -> dict[str, Any]:
    from serverless.pricing import DEFAULT_TABLE

    return json.loads(DEFAULT_TABLE.read_text())


def _region(d: dict[str, Any]) -> dict[str, Any]:
    """The default region's table in a price file."""
    return d["regions"][d["default_region"]]


@st.composite
def damaged_price_tables(draw: st.DrawFn) -> Any:
    d = _good_prices()
    where = draw(st.sampled_from(["file", "top", "lambda", "gb", "vm", "whole", "delete"]))
    if where == "whole":
        return draw(documents)
    t = _region(d)
    target = {"file": d, "top": t, "lambda": t["lambda"], "gb": t["lambda"]["gb_second_usd"], "vm": t["learner_vm"],
              "delete": t["lambda"]}[where]
    key = draw(st.sampled_from(sorted(target)))
    if where == "delete":
        del target[key]
    else:
        target[key] = draw(documents)
    return d


@FAST
@given(content=damaged_price_tables())
def test_a_damaged_price_table_loads_sane_or_is_refused_by_field(content: Any, tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(content))
    try:
        table = PriceTable.load(path)
    except UserError as exc:
        _one_line(str(exc))
        assert str(path) in str(exc)
        return
    for price in [*table.gb_second_usd.values(), table.request_usd, table.vm_usd_per_hour]:
        assert math.isfinite(price) and price >= 0
    assert table.granularity_ms >= 1
    for arch in table.gb_second_usd:
        assert math.isfinite(table.lambda_cost(100, 1769, arch))


def test_price_table_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    d = _good_prices()
    _region(d)["lambda"]["gb_second_usd"]["arm64"] = "cheap"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"lambda\.gb_second_usd\.arm64"):
        PriceTable.load(path)
    del _region(d)["learner_vm"]
    _region(d)["lambda"]["gb_second_usd"]["arm64"] = 1e-5
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"learner_vm"):
        PriceTable.load(path)


# ---------------------------------------------------------------------------------------------
# every CLI command's arguments


class ReachedJob(Exception):
    """The stand-in job was called: the input passed every check."""


def _stand_in(*_args: Any, **_kwargs: Any) -> Any:
    raise ReachedJob


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from ingestion import datagen

    root = tmp_path_factory.mktemp("cli")
    datagen.generate(1_000, "tsv", root / "data", shards=2)
    return _write_cli_files(root)


def _write_cli_files(root: Path) -> dict[str, Path]:
    """The small input files the calls name (rewritten before each call: `--write` may hit one).

    ``fifo`` stands for a path that is not a regular file (like /dev/null, which the test never
    names: a write that renames over it would replace the device for the whole machine)."""
    import os

    fifo = root / "fifo"
    if fifo.exists() and not fifo.is_fifo():
        fifo.unlink()
    if not fifo.exists():
        os.mkfifo(fifo)
    (root / "workload.yaml").write_text("name: demo\nrl: {env_id: CartPole-v1, target_reward: 100}\n")
    knobs = {"read_parallelism": 1, "cycle_length": 1, "shuffle_buffer": 1, "batch_size": 64, "parse_parallelism": 1,
             "transform_parallelism": 1, "prefetch_buffer": 1}
    (root / "knobs.json").write_text(json.dumps({"config": knobs, "data": str(root / "data"), "format": "tsv"}))
    (root / "outputs.json").write_text((Path(__file__).parent.parent / "infra/terraform/envs/dev/outputs.example.json").read_text())
    return {"root": root, "data": root / "data", "workload": root / "workload.yaml", "knobs": root / "knobs.json",
            "outputs": root / "outputs.json", "tfdir": Path(__file__).parent.parent / "infra/terraform/envs/dev",
            "fifo": fifo}


@pytest.fixture
def jobs_stubbed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import flows
    import ingestion.datagen
    import ingestion.measure
    import optimizers.seraph
    import optimizers.tuning
    import serverless.trainer
    import trainwise.cli.infra

    monkeypatch.setattr(serverless.trainer, "train", _stand_in)
    monkeypatch.setattr(optimizers.seraph, "tune_and_train", _stand_in)
    monkeypatch.setattr(ingestion.datagen, "generate", _stand_in)
    monkeypatch.setattr(optimizers.tuning, "tune_pipeline", _stand_in)
    monkeypatch.setattr(ingestion.measure, "measure", _stand_in)
    monkeypatch.setattr(flows, "get_flow", lambda _name: _stand_in)
    monkeypatch.setattr(trainwise.cli.infra, "_run", _stand_in)  # terraform itself
    monkeypatch.chdir(tmp_path)  # relative paths the calls name land here


INT = "int"
FLOAT = "float"
TEXT = "text"
PATH = "path"

# command -> (arguments a valid call needs, {flag: kind of value})
COMMANDS: dict[tuple[str, ...], tuple[list[str], dict[str, str]]] = {
    ("rl", "train"): (["--env", "CartPole-v1", "--target-reward", "100"], {
        "--env": TEXT, "--target-reward": FLOAT, "--max-steps": INT, "--actors": INT, "--memory-mb": INT,
        "--batch": INT, "--steps-per-env": INT, "--seed": INT, "--checkpoint-every": INT, "--backend": TEXT,
        "--architecture": TEXT}),
    ("rl", "tune"): (["--env", "CartPole-v1", "--target-reward", "100", "--objective", "cost"], {
        "--env": TEXT, "--target-reward": FLOAT, "--objective": TEXT, "--weight": FLOAT, "--deadline-s": FLOAT,
        "--budget-usd": FLOAT, "--backend": TEXT, "--architecture": TEXT, "--seed": INT, "--max-steps": INT,
        "--steps-per-env": INT, "--replan-every": INT, "--inject-faults": TEXT, "--baseline-config": TEXT,
        "--env-kwargs": TEXT}),
    ("ingest", "gen-data"): (["--rows", "1000", "--format", "tsv", "--out", "{root}/new"], {
        "--rows": INT, "--format": TEXT, "--out": PATH, "--shards": INT, "--seed": INT}),
    ("ingest", "tune"): (["--data", "{data}", "--optimizer", "grid"], {
        "--data": PATH, "--format": TEXT, "--optimizer": TEXT, "--time-budget-s": FLOAT, "--max-trials": INT,
        "--batch-size": INT, "--seed": INT, "--vcpus": INT, "--ram-gib": FLOAT, "--hourly-usd": FLOAT,
        "--on-bad-row": TEXT, "--autotune-rounds": INT}),
    ("ingest", "bench"): (["--config", "{knobs}"], {
        "--config": PATH, "--data": PATH, "--format": TEXT, "--warmup-s": FLOAT, "--window-s": FLOAT,
        "--repeats": INT, "--vcpus": INT, "--ram-gib": FLOAT, "--hourly-usd": FLOAT}),
    ("run",): (["--config", "{workload}"], {"--config": PATH, "--flow": TEXT}),
    ("infra", "output"): (["--from-json", "{outputs}"], {"--from-json": PATH, "--write": PATH}),
    ("infra", "plan"): (["--dir", "{tfdir}", "--package-zip", "{root}/f.zip"], {
        "--dir": PATH, "--binary": TEXT, "--var": TEXT, "--var-file": PATH, "--package-zip": PATH,
        "--layer-zip": PATH}),
}

FLAG_WORDS = {"--env": ["env"], "--format": ["format"], "--config": ["config", "workload"], "--data": ["data", "shard"],
              "--from-json": ["from-json"], "--out": ["out"], "--write": ["write"], "--binary": ["terraform"],
              "--package-zip": ["package-zip"], "--layer-zip": ["layer-zip"], "--dir": ["dir"]}


def _values(kind: str) -> st.SearchStrategy[str]:
    hostile = st.sampled_from(["", "-1", "0", "nan", "inf", "-inf", "1e400", "99999999999999999999", "abc", "💥", " "])
    # (no absolute system paths here: a failing check could write over them)
    if kind == INT:
        return st.one_of(hostile, st.integers(-(10**12), 10**12).map(str))
    if kind == FLOAT:
        return st.one_of(hostile, st.floats(allow_nan=True, allow_infinity=True).map(repr))
    if kind == PATH:
        return st.one_of(hostile, st.sampled_from(["{root}", "{root}/missing.yaml", "{workload}", "{data}", "{knobs}",
                                                   "{fifo}", "{root}/new/x.json", "{tfdir}", "{root}/f.zip"]))
    return st.one_of(hostile, st.text(alphabet=string.printable, max_size=12),
                     st.sampled_from(["CartPole-v1", "Nope-v0", "cost", "balanced", "local", "ray", "tsv", "tfrecord",
                                      "arm64", "grid", "optimize", "intune", "skip", "terraform", "region=us-east-1"]))


@st.composite
def cli_calls(draw: st.DrawFn) -> tuple[tuple[str, ...], list[str], str, str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    base, flags = COMMANDS[command]
    flag = draw(st.sampled_from(sorted(flags)))
    value = draw(_values(flags[flag]))
    return command, base, flag, value


def _fill(text: str, files: dict[str, Path]) -> str:
    for name, path in files.items():
        text = text.replace("{" + name + "}", str(path))
    return text


def _names_the_flag(message: str, flag: str, value: str) -> bool:
    words = [flag, flag[2:], flag[2:].replace("-", "_"), flag[2:].replace("-", " "), *FLAG_WORDS.get(flag, [])]
    return any(w.lower() in message.lower() for w in words) or (value.strip() != "" and value in message)


@FAST
@given(call=cli_calls())
def test_every_cli_command_runs_or_refuses_one_flag_by_name(
    call: tuple[tuple[str, ...], list[str], str, str], cli_files: dict[str, Path], jobs_stubbed: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainwise.cli import main

    command, base, flag, value = call
    value = _fill(value, cli_files)
    _write_cli_files(cli_files["root"])
    out = cli_files["root"] / "result.json"
    out.unlink(missing_ok=True)
    argv = [*command, *[_fill(a, cli_files) for a in base], f"{flag}={value}", "--json-out", str(out)]
    capsys.readouterr()
    try:
        code = main(argv)
    except ReachedJob:
        code = None
    except SystemExit as exc:  # argparse: a bad type or choice
        code = exc.code
    err = capsys.readouterr().err
    if code == 0:  # a command that finished (infra output): its whole result is written
        assert isinstance(json.loads(out.read_text()), dict)
        return
    assert not out.exists(), f"{argv}: a result file was written without a result"
    flag_kind = COMMANDS[command][1][flag]
    if flag_kind in (INT, FLOAT) and value.strip().lower() in ("nan", "inf", "-inf", "1e400", "-1e400"):
        assert code == 2, f"{argv}: a number that is not finite reached the job"
    if command[0] == "rl" and flag == "--seed" and value.lstrip("-").isdigit() and not 0 <= int(value) < 2**32:
        assert code == 2, f"{argv}: a seed numpy cannot take reached the job"
    if code is None:
        return  # every check passed and the job started
    assert code == 2, f"{argv}: exit {code}, stderr {err!r}"
    errors = [line for line in err.splitlines() if line.startswith("trainwise: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert _names_the_flag(errors[0], flag, value), f"{argv}: the error does not name {flag}: {errors[0]!r}"


def test_a_valid_call_of_each_command_reaches_its_job(cli_files: dict[str, Path], jobs_stubbed: None) -> None:
    """The property above is not vacuous: the base arguments of each command pass every check."""
    from trainwise.cli import main

    _write_cli_files(cli_files["root"])  # the property's valid calls may have written over them (`--write {knobs}`)
    for command, (base, _) in COMMANDS.items():
        if command == ("infra", "output"):
            assert main([*command, *[_fill(a, cli_files) for a in base]]) == 0
            continue
        with pytest.raises(ReachedJob):
            main([*command, *[_fill(a, cli_files) for a in base]])


def test_a_path_that_is_not_a_regular_file_is_never_written_over(cli_files: dict[str, Path], jobs_stubbed: None) -> None:
    """Atomic writes rename a new file over the target: over /dev/null, as root, that would
    replace the device. Every writer refuses such a path (a FIFO stands in for the device)."""
    from trainwise.cli import main

    _write_cli_files(cli_files["root"])
    fifo = str(cli_files["fifo"])
    calls = [
        ["infra", "output", "--from-json", str(cli_files["outputs"]), "--write", fifo],
        ["infra", "plan", "--dir", str(cli_files["tfdir"]), "--package-zip", fifo],
        ["infra", "output", "--from-json", str(cli_files["outputs"]), "--json-out", fifo],
    ]
    for argv in calls:
        assert main(argv) == 2, argv
        assert cli_files["fifo"].is_fifo(), f"{argv} replaced the FIFO"
