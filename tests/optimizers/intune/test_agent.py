"""The masked DQN: save/load round trip without pickle, masked acting, a tiny learning run,
and InTune as an ask/tell optimizer on the simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ingestion.simulator import SIM_NODES, dlrm_like_space, random_pipeline, simulate
from optimizers.asktell import run
from core.budget import Budget
from optimizers.intune import make_intune_optimizer
from optimizers.intune.settings import InTuneSettings
from optimizers.intune.agent import DQNConfig, MaskedDQN
from optimizers.intune.env import N_ACTIONS, OBS_DIM, STOP
from optimizers.intune.pretrain import PRETRAINED, pretrain
from core.errors import UserError


def test_save_load_round_trip(tmp_path):
    agent = MaskedDQN(DQNConfig(hidden=16), seed=3, info={"note": "x"})
    npz, spec = agent.save(tmp_path / "agent")
    again = MaskedDQN.load(tmp_path / "agent")
    obs = np.random.default_rng(0).normal(size=OBS_DIM).astype(np.float32)
    assert np.allclose(agent.q_values(obs), again.q_values(obs))
    assert again.info == {"note": "x"} and again.config.hidden == 16
    with np.load(npz, allow_pickle=False) as data:  # plain arrays only
        assert all(data[k].dtype != object for k in data.files)
    assert json.loads(spec.read_text())["format"] == "trainwise-intune-dqn"


def test_load_rejects_missing_or_foreign_files(tmp_path):
    with pytest.raises(UserError):
        MaskedDQN.load(tmp_path / "nothing")
    agent = MaskedDQN(DQNConfig(hidden=8))
    agent.save(tmp_path / "a")
    spec = json.loads((tmp_path / "a.json").read_text())
    spec["obs_version"] = -1
    (tmp_path / "a.json").write_text(json.dumps(spec))
    with pytest.raises(UserError):
        MaskedDQN.load(tmp_path / "a")


def test_act_never_picks_a_masked_action():
    agent = MaskedDQN(DQNConfig(hidden=8), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        mask = rng.random(N_ACTIONS) < 0.2
        mask[STOP] = True
        obs = rng.normal(size=OBS_DIM).astype(np.float32)
        for eps in (0.0, 1.0):
            assert mask[agent.act(obs, mask, eps)]


@pytest.mark.slow
def test_short_pretraining_runs_and_learns_something():
    torch.set_num_threads(1)
    agent = pretrain(600, seed=0, config=DQNConfig(hidden=16, learning_starts=200, batch_size=32))
    assert agent.info["env_steps"] == 600 and agent.grad_steps > 0


def test_committed_pretrained_agent_loads():
    agent = MaskedDQN.load(PRETRAINED)
    assert agent.obs_dim == OBS_DIM and agent.n_actions == N_ACTIONS
    assert PRETRAINED.with_suffix(".npz").stat().st_size < 1_000_000


@pytest.mark.slow
def test_intune_optimizer_improves_on_the_simulator_and_stays_safe(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINWISE_HOME", str(tmp_path))
    node = SIM_NODES[8]
    space = dlrm_like_space(node)
    truth = random_pipeline(np.random.default_rng(7), "parse")
    # a clock that advances 0.1 s per reading: the tuner's time budget then depends on how
    # many steps it took, never on how loaded the machine is
    ticks = iter(range(10**9))
    opt = make_intune_optimizer(space, node, budget=Budget.start(60, clock=lambda: 0.1 * next(ticks)), calibration=truth,
                                settings=InTuneSettings(max_steps=12))
    # 12 search steps, 3 confirmations and up to 3 settle pairs: at most 21 trials
    result = run(opt, lambda c: simulate(truth, c, node), max_trials=30)
    assert result.trials and all(space.is_valid(t.config) for t in result.trials)
    assert not any(t.measurement.failed for t in result.trials)
    assert result.best.rows_per_s >= simulate(truth, space.initial(), node).rows_per_s
    assert opt.finished  # it stopped by itself
    # the fine-tuned agent is saved for reuse and loads back
    saved = list((tmp_path / "agents").glob("*.npz"))
    assert saved and MaskedDQN.load(saved[0].with_suffix(""))


def test_bad_time_budget_is_a_user_error():
    with pytest.raises(UserError, match="time budget must be positive"):
        Budget.start(0)
