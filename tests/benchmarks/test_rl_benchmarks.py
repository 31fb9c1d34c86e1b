"""Behaviour of the RL benchmarks' bookkeeping (no framework is run here: fast).

The timing itself lives in benchmarks/ and is never asserted on; these tests check
that warm-up iterations are excluded, that ratios and the multi-env minimum are
computed as documented, and that bad arguments are refused before any work.
"""

from __future__ import annotations


import pytest

# The project root, not benchmarks/ itself: benchmarks/ingestion_live.py would shadow the ingestion package.
from benchmarks import _common, duty_cycle, rl_throughput


def test_iteration_clock_excludes_the_warmup_iteration() -> None:
    clock = rl_throughput.IterationClock()
    clock.marks = [(10.0, 4000), (12.0, 8000), (13.0, 12000), (15.0, 16000)]
    m = clock.measurement("x", "CartPole-v1", start=7.0, setup_s=1.5, config={}, iterations=3, load={})
    assert m.timed_env_steps == 12000
    assert m.timed_s == pytest.approx(5.0)
    assert m.steps_per_s == pytest.approx(2400.0)
    assert m.warmup_env_steps == 4000 and m.warmup_s == pytest.approx(3.0)
    assert m.iteration_s == [2.0, 1.0, 2.0]


def test_iteration_clock_refuses_a_short_run() -> None:
    clock = rl_throughput.IterationClock()
    clock.marks = [(1.0, 4000)]
    with pytest.raises(RuntimeError, match="expected 3 iterations"):
        clock.measurement("x", "e", start=0.0, setup_s=0.0, config={}, iterations=2, load={})


def _measurement(name: str, steps: int, seconds: float) -> rl_throughput.Measurement:
    return rl_throughput.Measurement(name, "e", steps, seconds, [], 0, 0.0, 0.0, {})


def test_ratios_and_worst_case_across_envs() -> None:
    a = rl_throughput._env_summary({"trainwise": _measurement("trainwise", 8000, 2.0),
                                    "rllib": _measurement("rllib", 8000, 8.0),
                                    "sb3": _measurement("sb3", 8000, 4.0)})
    assert a["ratio"] == 4.0 and a["ratio_sb3"] == 2.0
    b = {"ratio": 3.5, "ratio_sb3": 2.5}
    assert rl_throughput._worst({"A": a, "B": b}, "ratio") == 3.5
    assert rl_throughput._worst({"A": a, "B": b}, "ratio_sb3") == 2.0
    partial = rl_throughput._env_summary({"sb3": _measurement("sb3", 1, 1.0)})
    assert partial["ratio"] is None and rl_throughput._worst({"A": partial}, "ratio") is None


def test_shared_hyperparameters_match_the_issue() -> None:
    hp = rl_throughput.SharedPPO()
    assert (hp.batch, hp.minibatch, hp.epochs, hp.hidden, hp.parallel_envs) == (4000, 128, 10, (64, 64), 4)
    assert hp.steps_per_env * hp.parallel_envs == hp.batch


@pytest.mark.parametrize("argv", [["--frameworks", "trainwise,tf"], ["--iterations", "0"], ["--env", "Pong-v5"],
                                  ["--torch-threads", "0"]])
def test_throughput_rejects_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        rl_throughput._parse_args(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_quick_means_one_iteration_on_cartpole() -> None:
    args = rl_throughput._parse_args(["--quick"])
    assert args.iterations == 1 and args.envs == ["CartPole-v1"]
    assert rl_throughput._parse_args([]).envs == list(rl_throughput.ENVS)


@pytest.mark.parametrize("sizes", ["442,885", "100,1769", "a,1769"])
def test_duty_cycle_needs_the_reference_size(sizes: str) -> None:
    with pytest.raises(SystemExit):
        duty_cycle._parse_args(["--sizes", sizes])


def test_duty_cycle_rotation_visits_every_size() -> None:
    sizes = [442, 885, 1769]
    orders = [duty_cycle.rotated(sizes, k) for k in range(3)]
    assert [o[0] for o in orders] == sizes
    assert all(sorted(o) == sizes for o in orders)


def test_common_ratio_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert _common.ratio(6.0, 2.0) == 3.0
    assert _common.ratio(None, 2.0) is None and _common.ratio(1.0, 0.0) is None
    _common.print_table(["name", "value"], [["a", 1234.5], ["bb", None]], title="T")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "T" and "1,234.5" in out[3] and out[4].rstrip().endswith("-")


def test_breakdown_summary_puts_each_big_phase_against_its_floor() -> None:
    phases = {"encode_s": 0.01, "dispatch_s": 0.02, "function_env_s": 0.10, "function_policy_s": 0.05,
              "function_other_s": 0.03, "decode_s": 0.01, "gae_s": 0.01, "update_s": 0.40, "checkpoint_s": 0.0,
              "other_s": 0.02}
    m = rl_throughput.Measurement("trainwise", "LunarLander-v3", 8000, 1.4, [0.7, 0.7], 4000, 1.0, 0.1, {},
                                  breakdown_s={**phases, "iteration_s": 0.65, "sampling_s": 0.2, "learning_s": 0.4})
    floor = {"rollout": {"seconds": 0.1, "cpu_seconds": 0.1}, "update": {"seconds": 0.3, "cpu_seconds": 0.3}}
    b = rl_throughput.breakdown_summary(m, floor)
    assert b["rollout_s"] == pytest.approx(0.20) and b["env_steps_per_iteration"] == 4000
    assert b["phases_s"]["between_iterations_s"] == pytest.approx(0.05)  # 0.7 per iteration - 0.65 timed inside
    assert b["mean_iteration_s"] == pytest.approx(0.70)
    assert sum(b["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert b["vs_floor"] == {"rollout": 0.5, "rollout_in_function": pytest.approx(0.667, abs=1e-3), "update": 0.75}
    assert b["floor_bars_met"] == {"rollout": True, "update": True}
    assert "vs_floor" not in rl_throughput.breakdown_summary(m, None)


def test_update_floor_runs_the_same_minibatches() -> None:
    from benchmarks.rl_floors import update_floor_s

    out = update_floor_s("CartPole-v1", 300, 128, 1, (8,), 3e-4, 0.2, 0.5, 0.5, repeats=1)
    assert out["minibatch_updates_per_epoch"] == 2  # 128 + 172 (a tail under half a minibatch joins the last)
    assert out["seconds"] > 0 and out["label"] == "measured"


def test_update_engines_summary_pairs_the_engines_and_tests_their_env_steps() -> None:
    from benchmarks import update_engines

    rows = [
        {"seed": s, "engine": e, "reached": True, "env_steps": steps, "update_s_mean": t}
        for s, (a, b) in enumerate([(100, 110), (120, 90), (130, 140)])
        for e, steps, t in (("numpy", a, 0.01), ("torch", b, 0.03))
    ]
    summary = update_engines.summarise(rows)
    assert summary["numpy"]["env_steps_median"] == 120 and summary["torch"]["env_steps_median"] == 110
    assert summary["numpy"]["reached"] == summary["torch"]["runs"] == 3
    assert summary["update_speedup"] == pytest.approx(3.0)
    assert 0.0 < summary["env_steps_rank_sum_p"] <= 1.0
