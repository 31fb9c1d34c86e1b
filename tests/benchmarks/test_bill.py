"""The bill over seeds: sums, means and paired bootstrap intervals (benchmarks._common), and the
Seraph benchmark's bill table with its static-repeat control."""

from __future__ import annotations

import json

import pytest

from benchmarks._common import bootstrap_interval, median_ratio, seed_mean, sum_ratio


def test_a_ratio_of_sums_has_an_interval_around_it_that_resamples_seeds_in_pairs():
    mine, base = [1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]
    iv = bootstrap_interval(sum_ratio, mine, base)
    assert iv.estimate == pytest.approx(10.0 / 8.0) and iv.n == 4
    assert iv.low < iv.estimate < iv.high
    # resampled in pairs: the extremes are all of one seed, 1/2 and 4/2
    assert iv.low >= 0.5 and iv.high <= 2.0
    assert bootstrap_interval(sum_ratio, mine, base) == iv  # seeded: a re-score gets the same interval
    # a method that costs exactly twice the static run on every seed has no spread at all, however
    # much the seeds differ from one another: pairing is what makes the interval this narrow
    twice = bootstrap_interval(sum_ratio, [2.0, 8.0, 20.0], [1.0, 4.0, 10.0])
    assert (twice.low, twice.estimate, twice.high) == pytest.approx((2.0, 2.0, 2.0))


def test_means_medians_and_too_few_seeds():
    iv = bootstrap_interval(seed_mean, [1.0, 2.0, 6.0])
    assert iv.estimate == pytest.approx(3.0) and 1.0 <= iv.low <= iv.high <= 6.0
    assert bootstrap_interval(median_ratio, [1.0, 3.0, 5.0], [1.0, 1.0, 1.0]).estimate == pytest.approx(3.0)
    assert bootstrap_interval(seed_mean, [1.0]) is None  # one seed: no interval
    assert bootstrap_interval(sum_ratio, [1.0, 2.0], [1.0]) is None  # unpaired lengths
    assert iv.as_dict()["method"] == "percentile bootstrap over seeds" and "[" in iv.text()


def _run(method, seed, cost, time_s, steps=1000, reached=True):
    return {"method": method, "seed": seed, "cost_usd": cost, "lambda_time_s": time_s, "env_steps": steps,
            "wall_s": time_s, "reached": reached, "model_check": {"iteration_time_median_abs_error": None},
            "tuning_cost_usd": 0.0, "net_tuning_cost_usd": 0.0}


RUNS = [
    *(_run("static_default", s, c, 10.0) for s, c in ((0, 1.0), (1, 2.0), (2, 3.0))),
    *(_run("static_repeat", s, c, 10.0) for s, c in ((0, 1.1), (1, 1.9), (2, 3.0))),
    # cheap on two seeds, dear on the third: median ratio 0.5, but the bill is 1.0
    _run("seraph_cost", 0, 0.5, 5.0), _run("seraph_cost", 1, 1.0, 5.0), _run("seraph_cost", 2, 4.5, 20.0, reached=False),
    _run("seraph_speed", 0, 2.0, 5.0), _run("seraph_speed", 7, 2.0, 5.0),  # seed 7 has no static run: not paired
]


def test_the_bill_is_the_sum_over_the_same_seeds_and_the_static_repeat_is_the_control():
    from benchmarks.seraph import bill_against_static, summarise

    bill = bill_against_static(RUNS)
    assert [r["method"] for r in bill] == ["static_repeat", "seraph_cost", "seraph_speed"]
    control, cost, speed = bill
    assert control["control"] and not cost["control"]
    assert control["cost_sum_ratio"] == pytest.approx(6.0 / 6.0)
    assert cost["cost_sum_ratio"] == pytest.approx(6.0 / 6.0) and cost["reached"] == 2 and cost["seeds"] == 3
    assert cost["time_sum_ratio"] == pytest.approx(30.0 / 30.0)
    assert cost["cost_sum_ratio_interval"]["low"] < 1.0 < cost["cost_sum_ratio_interval"]["high"]
    assert speed["seeds"] == 1 and speed["cost_sum_ratio"] == pytest.approx(2.0)
    assert speed["cost_sum_ratio_interval"] is None  # one paired seed
    summary = summarise({"runs": RUNS, "oracle": {}})
    bars = summary["bars"]
    assert bars["cost_objective_median_per_seed_cost_ratio"] == pytest.approx(0.5)  # the median hides seed 2
    assert bars["cost_objective_bill_ratio_vs_static"] == pytest.approx(1.0)  # the bill does not
    assert bars["static_repeat_bill_ratio_vs_static"] == pytest.approx(1.0)
    row = next(t for t in summary["table"] if t["method"] == "seraph_cost")
    assert row["sum_cost_usd_modelled"] == pytest.approx(6.0)
    assert row["mean_cost_usd_modelled"]["estimate"] == pytest.approx(2.0)


def test_rescore_prints_the_bill_of_a_saved_result(tmp_path, capsys):
    from benchmarks.seraph import main

    saved = tmp_path / "r.json"
    saved.write_text(json.dumps({"envs": [{"env": "Acrobot-v1", "runs": RUNS, "oracle": {}}]}))
    assert main(["--rescore", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "the bill against the static default" in out
    assert "static_repeat (control)" in out and "1.000 [" in out
