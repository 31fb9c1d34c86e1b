"""The counterfactual layout probe: cut GAE, and its statistics on a real batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serverless import handler as handler_module
from serverless.layout_probe import boundaries, cut_gae, probe_layouts
from serverless.ppo import PPOConfig, compute_gae
from serverless.trainer import IterationRecord, TrainSpec, train
from serverless.run_shape import RunShape
from tests.serverless.test_trainer import InProcessBackend


def _segment(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    term = np.zeros(n, bool)
    term[n // 3] = True
    return {
        "rewards": rng.normal(size=n).astype(np.float32), "values": rng.normal(size=n).astype(np.float32),
        "terminated": term, "truncated": np.zeros(n, bool), "trunc_values": np.zeros(n, np.float32),
    }


def test_boundaries_nest_so_coarse_chunks_are_made_of_fine_ones() -> None:
    fine, coarse = boundaries(2000, 16), boundaries(2000, 4)
    assert coarse == fine[::4] and fine[0] == 0 and fine[-1] == 2000


def test_one_chunk_is_plain_gae_and_more_chunks_bootstrap_at_each_cut() -> None:
    tr = _segment(40)
    full = compute_gae(tr["rewards"], tr["values"], tr["terminated"], tr["truncated"], tr["trunc_values"], 0.7, 0.99, 0.95)
    one = cut_gae(tr, 0.7, 1, 0.99, 0.95)
    np.testing.assert_allclose(one[0], full[0], rtol=1e-6)
    two = cut_gae(tr, 0.7, 2, 0.99, 0.95)
    # the first chunk bootstraps V(obs[20]) at step 19 instead of carrying GAE through it
    assert two[0][19] == pytest.approx(tr["rewards"][19] + 0.99 * tr["values"][20] - tr["values"][19], rel=1e-5)
    assert not np.allclose(two[0][:20], full[0][:20])
    np.testing.assert_allclose(two[0][20:], full[0][20:], rtol=1e-6)  # the last chunk ends where the segment does


class ProbingController:
    def __init__(self, chunks: tuple[int, ...]) -> None:
        self.chunks, self.records = chunks, []

    def layout_probe(self) -> tuple[int, ...]:
        return self.chunks

    def after_iteration(self, record: IterationRecord) -> RunShape | None:
        self.records.append(record)
        return None


def _train(tmp_path: Path, controller: Any, **kw: Any) -> Any:
    handler_module.reset_warm_state()
    spec = TrainSpec(
        env_id="CartPole-v1", target_reward=1e9, max_steps=kw.pop("max_steps", 512),
        run=RunShape(actors=2, memory_mb=1769, batch=256), ppo=PPOConfig(epochs=2, minibatch_size=64, steps_per_env=128),
        seed=3, checkpoint_every=0, **kw,
    )
    return train(spec, backend=InProcessBackend(), controller=controller, progress=False)


def test_the_trainer_probes_layouts_when_the_controller_asks(tmp_path: Path) -> None:
    ctl = ProbingController((2, 4))
    _train(tmp_path, ctl, max_steps=256)
    probe = ctl.records[0].layout_probe
    assert probe is not None and probe["envs"] == 2 and probe["segment_steps"] == [128, 128]
    rows = {r["chunks"]: r["pairs"] for r in probe["layouts"]}
    assert set(rows) == {2, 4} and all(len(p) == 1 for p in rows.values())  # one pair of envs
    for pairs in rows.values():
        p = pairs[0]
        assert p["var_env"] >= 0 and np.isfinite(p["signal"]) and np.isfinite(p["bias"])
        # a chunk is noisier than a whole env's mean (fewer samples)
        assert p["var_chunk"] > p["var_env"] / 2


def test_without_a_probe_the_record_has_none_and_learning_is_unchanged(tmp_path: Path) -> None:
    probed, plain = ProbingController((2,)), ProbingController(())
    a, b = _train(tmp_path, probed), _train(tmp_path, plain)
    assert plain.records[0].layout_probe is None
    # the probe reads gradients at the pre-update parameters and changes nothing
    assert [r.mean_return for r in probed.records] == [r.mean_return for r in plain.records]
    assert a.env_steps == b.env_steps


class LayoutSwitch:
    """Switches to slots of 32 steps (8 envs) after the first iteration."""

    def __init__(self) -> None:
        self.records: list[IterationRecord] = []

    def after_iteration(self, record: IterationRecord) -> RunShape | None:
        self.records.append(record)
        return RunShape(actors=8, memory_mb=1769, batch=256, steps_per_env=32)


def test_a_controller_can_change_the_layout_mid_run(tmp_path: Path) -> None:
    ctl = LayoutSwitch()
    res = _train(tmp_path, ctl, max_steps=512)
    assert res.config_changes[0]["to"] == {"actors": 8, "memory_mb": 1769, "batch": 256, "steps_per_env": 32}
    assert ctl.records[0].rollout["invocations"] == 2 and ctl.records[1].rollout["invocations"] == 8


def test_the_numpy_engine_measures_what_autograd_measures() -> None:
    """The probe's gradients come from the learner's update engine; both engines give the same statistics."""
    import torch

    from serverless.envs import inspect_env
    from serverless.ppo import PPOLearner

    spec = inspect_env("CartPole-v1")
    learners = {e: PPOLearner(spec, PPOConfig(update_engine=e), seed=3) for e in ("numpy", "torch")}
    rng = np.random.default_rng(0)
    segments, advs, rets = [], [], []
    for k in range(3):
        tr = _segment(64, seed=k)
        tr["obs"] = rng.normal(size=(64, spec.obs_dim)).astype(np.float32)
        tr["actions"] = rng.integers(0, 2, 64)
        with torch.no_grad():
            logp, _, _ = learners["torch"].model.evaluate(torch.from_numpy(tr["obs"]), torch.from_numpy(tr["actions"]))
        tr["logprobs"] = logp.numpy()
        adv, ret = compute_gae(tr["rewards"], tr["values"], tr["terminated"], tr["truncated"], tr["trunc_values"],
                               0.5, 0.99, 0.95)
        segments.append((k, tr, 0.5))
        advs.append(adv)
        rets.append(ret)
    data = {"advantages": np.concatenate(advs), "returns": np.concatenate(rets)}
    probes = {e: probe_layouts(learner, segments, data, (2, 4)) for e, learner in learners.items()}
    for fast, plain in zip(probes["numpy"]["layouts"], probes["torch"]["layouts"]):
        assert fast["chunks"] == plain["chunks"] and len(fast["pairs"]) == len(plain["pairs"]) == 3
        for a, b in zip(fast["pairs"], plain["pairs"]):
            for key in ("var_env", "var_chunk", "signal", "bias"):
                assert a[key] == pytest.approx(b[key], rel=1e-3, abs=1e-9), key
    assert any(abs(p["bias"]) > 0 for row in probes["numpy"]["layouts"] for p in row["pairs"])  # cuts do move the gradient
