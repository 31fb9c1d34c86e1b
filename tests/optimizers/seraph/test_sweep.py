"""`rl sweep` and the history a second `rl tune` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import UserError
from optimizers.seraph import sweep as sweep_mod
from optimizers.seraph.arms import ArmChoice
from optimizers.seraph.history import Phase
from serverless.run_shape import RunShape
from optimizers.seraph.sweep import parse_seeds
from trainwise.cli import main


@pytest.mark.parametrize("text,seeds", [("0-9", tuple(range(10))), ("0,1,2", (0, 1, 2)), ("0-3,7", (0, 1, 2, 3, 7)),
                                        ("3,1,3", (3, 1)), (" 4 ", (4,))])
def test_seeds_take_ranges_and_lists(text: str, seeds: tuple[int, ...]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", " ", "0-x", "a", "5-2", "-1", "1,,2", "0-100000"])
def test_a_malformed_or_empty_seed_list_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError, match="--seeds"):
        parse_seeds(text)


@pytest.mark.parametrize("seeds", ["", "0-x"])
def test_the_cli_refuses_bad_seeds_in_one_line(seeds: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rl", "sweep", "--env", "CartPole-v1", "--target-reward", "100", "--seeds", seeds]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--seeds" in err.strip().splitlines()[-1]


class _Outcome:
    def __init__(self, seed: int, arm: str) -> None:
        from optimizers.seraph.history import RunRecord

        self.result: dict = {}
        self.record = RunRecord(key=None, seed=seed, arm=arm, objective="cost", source="test",  # type: ignore[arg-type]
                                phases=(Phase(RunShape(2, 1769, 4000, 2000)),), reached=True, env_steps=100,
                                lambda_time_s=1.0, cost_usd=0.5 + seed, wall_s=0.1, cost_label="modelled")


def test_concurrent_seeds_see_each_other_s_pending_arms_and_the_total_is_the_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each decision gets the arms of the seeds in flight; every seed's cost is in the total."""
    seen: list[list[str]] = []

    def fake_decide(job, history, settings, pending=()):  # type: ignore[no-untyped-def]
        seen.append(list(pending))
        return ArmChoice(f"arm{len(seen)}", None, "test")

    monkeypatch.setattr(sweep_mod, "decide", fake_decide)
    monkeypatch.setattr(sweep_mod, "run_job", lambda job, choice, history, **kw: _Outcome(job.request.seed, choice.name))
    monkeypatch.setattr(sweep_mod, "history_of", lambda job: type("H", (), {"key": type("K", (), {"describe": lambda s: "job"})()})())
    from optimizers.seraph.request import SeraphRequest

    result = sweep_mod.sweep(SeraphRequest(env_id="CartPole-v1", target_reward=100.0), (0, 1, 2), concurrency=1).to_dict()
    assert seen == [[], [], []]  # one at a time: nothing in flight
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
    assert result["total"]["cost_usd"] == pytest.approx(0.5 + 1.5 + 2.5)


@pytest.mark.slow
def test_a_second_run_of_a_job_reads_the_first_from_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rl tune` records its run; the next run of the same job decides from that evidence
    (the tuner's own run again: the bill has no room yet for an arm's worst case), and a run
    of another target starts afresh."""
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path / "home"))
    args = ["rl", "tune", "--env", "CartPole-v1", "--target-reward", "60", "--objective", "cost"]
    assert main([*args, "--seed", "0", "--json-out", str(tmp_path / "a.json")]) == 0
    assert main([*args, "--seed", "1", "--json-out", str(tmp_path / "b.json")]) == 0
    first, second = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert first["history"]["choice"]["arm"] == "seraph" and first["history"]["choice"]["history_runs"] == 0
    assert second["history"]["choice"]["history_runs"] == 1 and second["history"]["choice"]["arm"] == "seraph"
    assert second["history"]["choice"]["spent_reference_runs"] == pytest.approx(1.0)
    assert second["achieved"]["reached"] and second["history"]["job_id"] == first["history"]["job_id"]
    assert len(list((tmp_path / "home" / "history").glob("*.json"))) == 2
    other = ["rl", "tune", "--env", "CartPole-v1", "--target-reward", "61", "--objective", "cost", "--plan-only"]
    assert main([*other, "--json-out", str(tmp_path / "c.json")]) == 0
    assert "history" not in json.loads((tmp_path / "c.json").read_text())  # a plan-only run records nothing
