"""The learner's machine: chosen at the speed band's low end, priced and timed by the trainer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizers.seraph.learner_choice import choose_learner
from serverless.learner_machines import LearnerMachine, LearnerTable, load_learner_table

REF = LearnerMachine("c7i.large", "x86_64", 2, 4, 0.08925, (0.9, 1.1))
CHEAP_SLOW = LearnerMachine("c7g.medium", "arm64", 1, 2, 0.0363, (0.6, 0.9))
FAST_DEAR = LearnerMachine("c7a.medium", "x86_64", 1, 2, 0.05135, (0.9, 1.2))


def table(*machines: LearnerMachine) -> LearnerTable:
    return LearnerTable("test", "us-east-1", "test", REF, (REF, *machines))


def test_the_shipped_table_loads_with_its_reference() -> None:
    t = load_learner_table()
    assert t.reference.instance_type == "c7i.large" and t.get("c7g.medium").architecture == "arm64"
    assert all(0 < m.speed[0] <= m.speed[1] for m in t.machines)


def test_the_cost_objective_takes_a_cheaper_machine_counted_at_its_slowest() -> None:
    c = choose_learner("cost", 0.5, rollout_s=1.0, host_s=1.0, table=table(CHEAP_SLOW))
    assert c.changed and c.machine == CHEAP_SLOW
    opt = next(o for o in c.options if o.machine == CHEAP_SLOW)
    assert opt.speed == 0.6 and opt.iteration_s == pytest.approx(1.0 + 1.0 / 0.6)
    assert "c7g.medium" in c.tfvars()


def test_the_speed_objective_keeps_the_reference_when_no_band_low_end_is_faster() -> None:
    c = choose_learner("speed", 0.5, rollout_s=1.0, host_s=1.0, table=table(CHEAP_SLOW, FAST_DEAR))
    assert not c.changed and "no candidate beats it" in c.reason


def test_a_machine_dearer_per_robust_second_is_not_chosen() -> None:
    dear = replace(CHEAP_SLOW, usd_per_hour=0.2)
    assert not choose_learner("cost", 0.5, 1.0, 1.0, table=table(dear)).changed


def test_the_trainer_prices_and_times_the_chosen_learner(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short run on c7g.medium: the ledger's learner line is at the machine's price, and the
    learner host's part of the modelled clock is slower by 1 / 0.6 (the clock's reading fixed)."""
    from serverless import trainer
    from serverless.iteration_clock import IterationTimes
    from serverless.ppo import PPOConfig
    from serverless.trainer import RunConfig, TrainSpec, train

    fixed = IterationTimes(wall_s=1.0, host_s=0.3, host_speed=1.0, lambda_s=1.3, modelled=True)
    monkeypatch.setattr(trainer.IterationClock, "stop", lambda self, **kw: fixed)

    def run(learner: LearnerMachine | None):  # type: ignore[no-untyped-def]
        spec = TrainSpec(env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunConfig(1, 1769, 256),
                         ppo=PPOConfig(), seed=0, checkpoint_every=0, learner=learner)
        return train(spec, progress=False)

    base, cheap = run(None), run(CHEAP_SLOW)
    line = {l["component"]: l for l in cheap.ledger.to_dict()["lines"]}["learner_vm"]
    assert line["unit_price_usd"] == pytest.approx(CHEAP_SLOW.usd_per_hour)
    assert [r.host_s for r in cheap.iterations] == pytest.approx([0.3 / 0.6] * 2)
    assert [r.iteration_lambda_s for r in cheap.iterations] == pytest.approx([1.0 + 0.3 / 0.6] * 2)
    assert [r.host_s for r in base.iterations] == pytest.approx([0.3] * 2)
    assert cheap.config["learner"]["instance_type"] == "c7g.medium" and "learner" not in base.config


def test_without_models_the_reference_machine_is_kept_and_says_why() -> None:
    from optimizers.seraph.learner_choice import keep_reference

    c = keep_reference("no cached profile", table=table(CHEAP_SLOW))
    assert not c.changed and "no cached profile" in c.reason and c.to_dict()["instance_type"] == "c7i.large"
