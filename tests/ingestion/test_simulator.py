"""Simulator behaviour: processor sharing, out-of-memory, monotonic in cores, inline stages."""

from __future__ import annotations

import numpy as np
import pytest

from ingestion.knobs import Knob, KnobSpace
from ingestion.node import Node
from ingestion.simulator import (
    SIM_NODES,
    PipelineModel,
    StageModel,
    dlrm_like_space,
    memory_mb,
    model_from_space,
    random_pipeline,
    simulate,
)


def one_stage(cpu_s: float = 1e-3, wait_s: float = 0.0, values=(1, 2, 4, 8, 16)) -> tuple[PipelineModel, KnobSpace]:
    model = PipelineModel("one", (StageModel("work", cpu_s, wait_s_per_row=wait_s, threads_knob="t"),), burstiness=0.0,
                          oversub_overhead=0.0)
    space = KnobSpace((Knob("t", tuple(values), kind="cpu", stage="work"),), cpu_budget=max(values))
    return model, space


def test_cpu_bound_stage_scales_with_threads_until_cores_then_is_shared():
    model, _ = one_stage(cpu_s=1e-3)
    node = Node("n4", vcpus=4, ram_gib=8)
    rates = {t: simulate(model, {"t": t}, node).rows_per_s for t in (1, 2, 4, 8, 16)}
    assert rates[2] == pytest.approx(2 * rates[1])
    assert rates[4] == pytest.approx(4000.0)
    # more threads than cores: processor sharing gives each a share, the total stays at 4 cores
    assert rates[8] == pytest.approx(4000.0)
    assert simulate(model, {"t": 8}, node).extra["cpu_share_per_thread"] == pytest.approx(0.5)


def test_oversubscription_overhead_lowers_throughput():
    model, _ = one_stage(cpu_s=1e-3)
    from dataclasses import replace

    node = Node("n4", vcpus=4, ram_gib=8)
    costly = replace(model, oversub_overhead=0.1)
    assert simulate(costly, {"t": 16}, node).rows_per_s < simulate(costly, {"t": 4}, node).rows_per_s


def test_io_bound_stage_gains_from_threads_beyond_cores():
    model, _ = one_stage(cpu_s=1e-4, wait_s=9e-4)  # 10% CPU
    node = Node("n2", vcpus=2, ram_gib=8)
    assert simulate(model, {"t": 8}, node).rows_per_s > 3 * simulate(model, {"t": 2}, node).rows_per_s


@pytest.mark.parametrize("vcpus", [8, 32, 64, 96])
def test_monotonic_in_cores_on_a_parallel_bound_stage(vcpus):
    model, _ = one_stage(cpu_s=1e-3, values=tuple(range(1, 97)))
    node = Node("n", vcpus=vcpus, ram_gib=64)
    rates = [simulate(model, {"t": t}, node).rows_per_s for t in range(1, vcpus + 1)]
    assert all(b >= a for a, b in zip(rates, rates[1:]))
    assert rates[-1] == pytest.approx(vcpus * 1000.0)
    # and more cores never hurt the same configuration
    small, big = Node("a", vcpus=4, ram_gib=64), Node("b", vcpus=8, ram_gib=64)
    assert simulate(model, {"t": 8}, big).rows_per_s > simulate(model, {"t": 8}, small).rows_per_s


def test_two_stages_share_cores_and_bottleneck_is_reported():
    model = PipelineModel(
        "two",
        (StageModel("a", 1e-3, threads_knob="a"), StageModel("b", 3e-3, threads_knob="b")),
        burstiness=0.0, oversub_overhead=0.0,
    )
    node = Node("n4", vcpus=4, ram_gib=8)
    balanced = simulate(model, {"a": 1, "b": 3}, node)
    assert balanced.rows_per_s == pytest.approx(1000.0)
    assert simulate(model, {"a": 3, "b": 1}, node).extra["bottleneck"] == "b"
    # 4 + 12 threads on 4 cores: the total CPU demand X * (1e-3 + 3e-3) cannot exceed 4 cores
    crowded = simulate(model, {"a": 4, "b": 12}, node)
    assert crowded.rows_per_s * 4e-3 <= 4.0 + 1e-6


def test_out_of_memory_over_the_ram_budget():
    node = SIM_NODES[8]  # 16 GiB, budget 8 GiB
    space = dlrm_like_space(node)
    model = random_pipeline(np.random.default_rng(3), "transform")
    small = {**space.initial(), "batch_size": 256, "prefetch": 1}
    big = {**space.initial(), "batch_size": 8192, "prefetch": 64, "transform_threads": 4}
    m_small, m_big = simulate(model, small, node), simulate(model, big, node)
    assert not m_small.failed and m_small.rows_per_s > 0
    assert memory_mb(model, big)[0] > node.ram_budget_mb
    assert m_big.failed and m_big.rows_per_s == 0 and m_big.score == float("-inf")
    assert m_small.label == "simulated"


def test_memory_grows_with_buffers_and_batch():
    model = random_pipeline(np.random.default_rng(0), "parse")
    space = dlrm_like_space(SIM_NODES[8])
    base = space.initial()
    assert memory_mb(model, {**base, "prefetch": 8})[0] > memory_mb(model, {**base, "prefetch": 2})[0]
    assert memory_mb(model, {**base, "batch_size": 4096})[0] > memory_mb(model, {**base, "batch_size": 1024})[0]


def test_inline_stages_run_in_one_thread():
    """Thread knob 0 (tf.data sequential) folds the stage into the puller's single thread."""
    space = KnobSpace(
        (Knob("ra", (0, 1, 2), kind="cpu", stage="read"), Knob("pa", (0, 1, 2), kind="cpu", stage="parse")),
        cpu_budget=2,
    )
    model = model_from_space(space, costs={"read": {"cpu_s_per_row": 1e-3}, "parse": {"cpu_s_per_row": 1e-3}},
                             burstiness=0.0, oversub_overhead=0.0)
    node = Node("n2", vcpus=2, ram_gib=8)
    assert simulate(model, {"ra": 0, "pa": 0}, node).rows_per_s == pytest.approx(500.0)  # 2 ms per row, one thread
    assert simulate(model, {"ra": 0, "pa": 2}, node).rows_per_s == pytest.approx(1000.0)  # read in parse's runner
    assert simulate(model, {"ra": 0, "pa": 2}, node).extra["bottleneck"] in ("read", "parse")


def _chain(threads_cap: str | None = None) -> tuple[PipelineModel, KnobSpace]:
    """read (1 ms/row) -> parse (2 ms/row) -> sink (tiny), every thread knob 0 = inline."""
    space = KnobSpace(
        (Knob("ra", (0, 1, 2), kind="cpu", stage="read", limited_by=threads_cap),
         Knob("files", (1, 4), kind="other", stage="read", default=1),
         Knob("pa", (0, 1, 2), kind="cpu", stage="parse"),
         Knob("sink", (1,), kind="buffer", stage="sink")),
        cpu_budget=2,
    )
    costs = {"read": {"cpu_s_per_row": 1e-3}, "parse": {"cpu_s_per_row": 2e-3}, "sink": {"cpu_s_per_row": 1e-9}}
    return model_from_space(space, costs=costs, burstiness=0.0, oversub_overhead=0.0), space


def test_parallel_stage_fetches_its_input_in_its_own_calls():
    """tf.data's parallel map runs its inline input in its runner, counted as one call in flight:
    with one thread, fetch and call are serial (no gain over sequential); with two they overlap."""
    model, _ = _chain()
    node = Node("n4", vcpus=4, ram_gib=8)
    rate = lambda **k: simulate(model, {"ra": 0, "files": 1, "pa": 0, "sink": 1, **k}, node).rows_per_s  # noqa: E731
    assert rate() == pytest.approx(1 / 3e-3)
    assert rate(pa=1) == pytest.approx(1 / 3e-3)  # read + parse in one slot
    assert rate(pa=2) == pytest.approx(2 / 3e-3)  # two slots of 3 ms, runner busy 1 ms per row
    assert rate(ra=1, pa=1) == pytest.approx(1 / 2e-3)  # read's own thread feeds parse's buffer
    group = __import__("ingestion.simulator", fromlist=["servers"]).servers(model, {"ra": 0, "files": 1, "pa": 1, "sink": 1})
    assert [g.feeder for g in group] == [None, 0, None]


def test_a_runner_fetching_its_input_adds_no_oversubscribed_thread():
    from dataclasses import replace

    model, _ = _chain()
    node = Node("n2", vcpus=2, ram_gib=8)
    config = {"ra": 0, "files": 1, "pa": 2, "sink": 1}  # runner(read) + 2 parse calls + sink thread
    costly = replace(model, oversub_overhead=0.5)
    # 2 parse calls (the runner's fetch is one of them) + the sink = 3 threads on 2 cores, not 4
    assert simulate(costly, config, node).rows_per_s == pytest.approx(simulate(model, config, node).rows_per_s / 1.25)


def test_thread_cap_knob_limits_the_threads_a_stage_runs():
    from dataclasses import replace

    model, _ = _chain(threads_cap="files")
    assert model.stage("read").threads_cap_knob == "files"
    # make reading the bottleneck: parse almost free
    model = replace(model, stages=tuple(replace(s, cpu_s_per_row=1e-9) if s.name == "parse" else s for s in model.stages))
    node = Node("n4", vcpus=4, ram_gib=8)
    base = {"ra": 2, "files": 1, "pa": 0, "sink": 1}
    assert simulate(model, base, node).rows_per_s == pytest.approx(simulate(model, {**base, "ra": 1}, node).rows_per_s)
    assert simulate(model, {**base, "files": 4}, node).rows_per_s > simulate(model, base, node).rows_per_s
    assert memory_mb(model, base)[0] == memory_mb(model, {**base, "ra": 1})[0]


def test_core_contention_slows_work_on_several_cores_only():
    from dataclasses import replace

    model, _ = one_stage(cpu_s=1e-3)
    node = Node("n4", vcpus=4, ram_gib=8)
    slowed = replace(model, core_contention=0.3)
    assert simulate(slowed, {"t": 1}, node).rows_per_s == pytest.approx(simulate(model, {"t": 1}, node).rows_per_s)
    assert simulate(slowed, {"t": 4}, node).rows_per_s == pytest.approx(4000.0 / 1.3)
    assert simulate(slowed, {"t": 2}, node).rows_per_s > simulate(slowed, {"t": 1}, node).rows_per_s


def test_model_json_round_trip():
    from dataclasses import replace

    model = replace(random_pipeline(np.random.default_rng(1), "read"), core_contention=0.2)
    again = PipelineModel.from_json(model.to_json())
    assert again == model
    capped, _ = _chain(threads_cap="files")
    assert PipelineModel.from_json(capped.to_json()) == capped


def test_prefix_costs_are_differences_with_a_monotone_envelope():
    from ingestion.calibrate import stage_costs_from_prefixes

    # single-thread prefix rates: 1/r = 2, 5, 15 microseconds per row
    costs = stage_costs_from_prefixes(["a", "b", "c"], {"a": 5e5, "b": 2e5, "c": 1e5 / 1.5})
    assert costs["a"] == pytest.approx(2e-6) and costs["b"] == pytest.approx(3e-6) and costs["c"] == pytest.approx(10e-6)
    # a shorter prefix measured slower than a longer one is bounded by the longer one
    noisy = stage_costs_from_prefixes(["a", "b", "c"], {"a": 1e5, "b": 2e5, "c": 1e5})
    assert noisy["a"] == pytest.approx(5e-6) and noisy["b"] <= 1e-7 and noisy["c"] == pytest.approx(5e-6)


def _two_stage_with_helper(helper: float) -> tuple[PipelineModel, Node]:
    """A feeder run (1 us/row) and a parse stage (4 us/row on its own thread, ``helper`` more
    on intra-op threads), on 2 cores."""
    model = PipelineModel("h", (StageModel("read", 1e-6),
                                StageModel("parse", 4e-6, threads_knob="p", helper_cpu_s_per_row=helper)),
                          burstiness=0.0, oversub_overhead=0.0)
    return model, Node("n2", vcpus=2, ram_gib=8)


def test_helper_cpu_costs_nothing_while_a_core_is_free_and_competes_for_cores_otherwise():
    plain, node = _two_stage_with_helper(0.0)
    helped, _ = _two_stage_with_helper(2e-6)
    # sequential: one thread at 5 us/row; its helpers run on the idle core, the rate is unchanged
    assert simulate(helped, {"p": 0}, node).rows_per_s == pytest.approx(simulate(plain, {"p": 0}, node).rows_per_s)
    assert simulate(plain, {"p": 0}, node).rows_per_s == pytest.approx(200_000.0)
    # two parse threads: without helpers the 2 cores give 2 / 5 us = 400k rows/s; with 2 us/row of
    # helper CPU the demand is 7 us/row, so at most 2 / 7 us
    assert simulate(plain, {"p": 2}, node).rows_per_s == pytest.approx(400_000.0, rel=1e-3)
    two = simulate(helped, {"p": 2}, node).rows_per_s
    assert two <= 2 / 7e-6 * (1 + 1e-9) and two > 200_000.0
    # a model without helper CPU is exactly the model of before (the cap is not applied)
    assert simulate(plain, {"p": 1}, node).rows_per_s == pytest.approx(1 / 5e-6)


def test_helper_cpu_counts_as_busy_cores_in_the_contention_factor():
    from dataclasses import replace

    plain, node = _two_stage_with_helper(0.0)
    helped, _ = _two_stage_with_helper(1e-6)
    plain, helped = replace(plain, core_contention=0.5), replace(helped, core_contention=0.5)
    # sequential: 1 core busy without helpers (no contention), 1.2 with them (some)
    assert simulate(plain, {"p": 0}, node).rows_per_s == pytest.approx(200_000.0)
    assert simulate(helped, {"p": 0}, node).rows_per_s == pytest.approx(200_000.0 / (1 + 0.5 * 0.2), rel=1e-6)


def test_helper_cpu_round_trips_through_json_and_old_json_has_none():
    helped, _ = _two_stage_with_helper(2e-6)
    again = PipelineModel.from_json(helped.to_json())
    assert again == helped and again.stage("parse").helper_cpu_s_per_row == 2e-6
    old = helped.to_json()
    for s in old["stages"]:
        del s["helper_cpu_s_per_row"]
    assert PipelineModel.from_json(old).stage("parse").helper_cpu_s_per_row == 0.0


def test_solved_fixed_points_are_reused_and_callers_get_their_own_lists():
    """Configurations that differ only in a buffer share the servers' fixed point; a caller that
    changes the lists it got back does not change what the next caller gets."""
    from ingestion.simulator import servers, solve_servers

    node = SIM_NODES[32]
    model, space = random_pipeline(np.random.default_rng(2), "parse"), dlrm_like_space(node)
    config = space.initial()
    first = solve_servers(servers(model, config), 32.0)
    first[1][0] = -1.0
    again = solve_servers(servers(model, config), 32.0)
    assert again[1][0] > 0 and again[0] == first[0]
    bigger = {**config, "prefetch": 8 if config["prefetch"] != 8 else 16}
    assert solve_servers(servers(model, bigger), 32.0) == again  # a buffer does not change the servers
    burst = model.burstiness
    ratio = simulate(model, bigger, node).rows_per_s / simulate(model, config, node).rows_per_s
    assert ratio == pytest.approx((1 - burst / (1 + bigger["prefetch"])) / (1 - burst / (1 + config["prefetch"])))


def test_a_feeder_must_come_before_the_stage_it_feeds():
    from ingestion.simulator import processor_sharing_throughput

    x, caps, _, _ = processor_sharing_throughput([1e-3, 1e-3], [0.0, 0.0], [1.0, 2.0], 4.0, feeders=[None, 0])
    assert x == pytest.approx(min(caps)) and caps[1] == pytest.approx(2 / 2e-3)
    with pytest.raises(ValueError, match="feeder"):
        processor_sharing_throughput([1e-3, 1e-3], [0.0, 0.0], [2.0, 1.0], 4.0, feeders=[1, None])
