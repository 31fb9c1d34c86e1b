"""The planner's shortcuts plan what the plain way plans: the node level filled in forked
processes equals the serial table, the tuning's memoised masker equals InTune's, and the re-cover
move's screening finds the move a plain scan finds."""

from __future__ import annotations

import numpy as np
import pytest

from ingestion.cluster.instances import select
from ingestion.cluster.model import from_jobs_file
from optimizers.intune.env import Masker
from optimizers.intunex import node_pool
from optimizers.intunex.cluster_agent import LinearPolicy, State, _costs, _pair_additions, _removals, episode, recover
from optimizers.intunex.node_agent import MEMORY_MARGIN, NodeTable, TuningMasker
from optimizers.intunex.planner import plan_intunex
from optimizers.intunex.policies import cluster_policy
from optimizers.intunex.pretrain import random_problem
from optimizers.intunex.whatif import synthetic_spec


def _cluster(seed: int = 3):
    spec = synthetic_spec(12, 4, 3, seed=seed)
    return from_jobs_file(spec, select(spec.pool.instance_types))


@pytest.mark.skipif(not node_pool.can_fork(), reason="forked node-level workers need the fork start method")
def test_node_level_in_two_processes_equals_the_serial_table_and_plan() -> None:
    cluster = _cluster()
    serial, forked = NodeTable(cluster), NodeTable(cluster, processes=2)
    assert len(node_pool.tune_parallel(forked, cluster.units(), "intunex", 2)) >= node_pool.MIN_TUNINGS
    forked.fill_units(cluster.units(), "intunex")
    assert node_pool.tune_parallel(forked, cluster.units(), "intunex", 2) == {}  # nothing left to tune
    one = plan_intunex(cluster, serial, cluster_policy(), seed=3)
    two = plan_intunex(cluster, forked, cluster_policy(), seed=3)
    assert list(forked._memo.items()) == list(serial._memo.items())  # same choices, in the same order
    assert two.to_json()["assignment"] == one.to_json()["assignment"]
    assert two.result.usd_per_h == one.result.usd_per_h and two.result.all_fed


def test_a_table_with_one_process_tunes_in_this_process() -> None:
    cluster = _cluster()
    assert node_pool.tune_parallel(NodeTable(cluster), cluster.units(), "intunex", 1) == {}


def test_the_tunings_masker_answers_as_intunes() -> None:
    cluster = _cluster()
    job, unit = cluster.jobs[0], cluster.units()[0]
    space, model = cluster.space(job, unit), cluster.pipeline_on(job, unit)
    plain, memo = Masker(space, unit.node, model, MEMORY_MARGIN), TuningMasker(space, unit.node, model)
    rng, config, seen = np.random.default_rng(0), space.initial(), 0
    for _ in range(60):  # a random walk, revisiting configurations
        targets = plain.targets(config)
        assert memo.targets(config) == targets and memo.targets(config) == targets
        assert memo.safe(config) == plain.safe(config)
        assert (memo.mask(config) == plain.mask(config)).all()
        moves = [c for c in targets if c is not None]
        config, seen = moves[int(rng.integers(len(moves)))], seen + 1
    assert seen == 60


def _plain_recover(state: State) -> State | None:
    """The re-cover move by a plain scan over every removal and addition (what recover must find)."""
    p = state.p
    if not bool(state.fed.all()):
        return None
    cost0, _, used0 = _costs(p, state.shares)
    for j in range(p.rows.shape[0]):
        for removal in _removals(state.counts[j]):
            for add in _pair_additions(p, j):
                out = state.copy()
                for u in removal:
                    out.add(j, u, -1)
                for v in add:
                    out.add(j, v)
                cost, nodes, used = _costs(p, out.shares)
                feeds = out.supply[j] >= p.demand[j] * (1 - 1e-9)
                fits = nodes <= p.max_nodes and (p.budget is None or cost <= p.budget * (1 + 1e-9))
                cheaper = cost < cost0 - 1e-9 or (cost <= cost0 + 1e-9 and used < used0 - 1e-9)
                if removal != add and feeds and fits and cheaper:
                    return out
    return None


def test_recover_finds_the_move_a_plain_scan_finds() -> None:
    rng, moves = np.random.default_rng(11), 0
    for _ in range(60):
        p = random_problem(rng)
        state, _ = episode(LinearPolicy(), p, rng)
        for _ in range(4):
            found, plain = recover(state), _plain_recover(state)
            assert (found is None) == (plain is None)
            if found is None:
                break
            assert (found.counts == plain.counts).all()
            moves, state = moves + 1, found
    assert moves >= 20
