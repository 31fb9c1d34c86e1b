"""The learner's machine: chosen at the speed band's low end, priced and timed by the trainer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizers.seraph.learner_choice import choose_learner
from serverless.learner_machines import LearnerMachine, LearnerTable, ThreadScaling, load_learner_table
from serverless.run_shape import RunShape

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
    from serverless.trainer import TrainSpec, train

    fixed = IterationTimes(wall_s=1.0, host_s=0.3, host_speed=1.0, lambda_s=1.3, modelled=True)
    monkeypatch.setattr(trainer.IterationClock, "stop", lambda self, **kw: fixed)

    def run(learner: LearnerMachine | None):  # type: ignore[no-untyped-def]
        spec = TrainSpec(env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunShape(1, 1769, 256),
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


# ------------------------------------------------------------------ the update's threads
ONE_VCPU_REF = LearnerMachine("ref.medium", "x86_64", 1, 2, 0.05, (0.9, 1.1))
TWO_VCPU = LearnerMachine("two.large", "x86_64", 2, 4, 0.10, (0.9, 1.1))
FOUR_VCPU = LearnerMachine("four.xlarge", "x86_64", 4, 8, 0.20, (0.9, 1.1))


def scaling(at_two: float) -> ThreadScaling:
    return ThreadScaling(((1, 1.0), (2, at_two)), "fake timing")


def test_a_measured_speedup_makes_a_two_vcpu_machine_win_on_speed() -> None:
    """At 1.0 a second vCPU is worth nothing and the 2-vCPU machine's band low end (0.9) loses to
    the reference's 1.0; at a measured 1.6 its update runs 0.9 x 1.6 = 1.44 times as fast."""
    t = LearnerTable("test", "us-east-1", "test", ONE_VCPU_REF, (ONE_VCPU_REF, TWO_VCPU))
    flat = choose_learner("speed", 0.5, rollout_s=1.0, host_s=1.0, table=t, update_s=0.8, scaling=scaling(1.0))
    assert not flat.changed
    fast = choose_learner("speed", 0.5, rollout_s=1.0, host_s=1.0, table=t, update_s=0.8, scaling=scaling(1.6))
    assert fast.changed and fast.machine.instance_type == "two.large" and fast.machine.threads == 2
    # only the update (0.8 s) is sped up by the threads, the rest (0.2 s) runs at the band's low end
    assert fast.options[-1].iteration_s == pytest.approx(1.0 + 0.2 / 0.9 + 0.8 / (0.9 * 1.6))
    d = fast.to_dict()
    assert d["update_threads"] == 2 and d["threads_speedup"] == {"1": 1.0, "2": 1.6} and d["threads_label"] == "fake timing"
    assert "1.60x" in fast.threads_line() and "2 thread(s)" in fast.threads_line()


def test_the_reference_at_two_threads_is_a_plan_of_its_own() -> None:
    """The shipped reference (c7i.large, 2 vCPU) stays at 1.0 for the static default; a plan may run
    its update on both vCPUs when that was measured faster."""
    c = choose_learner("speed", 0.5, rollout_s=1.0, host_s=1.0, update_s=1.0, scaling=scaling(1.6))
    assert c.changed and c.machine.instance_type == "c7i.large" and c.machine.threads == 2
    assert c.options[0].machine == c.reference and c.options[0].iteration_s == pytest.approx(2.0)


def test_a_four_vcpu_machine_on_a_two_cpu_host_counts_the_two_thread_speedup() -> None:
    from optimizers.seraph.learner_threads import thread_counts

    t = LearnerTable("test", "us-east-1", "test", ONE_VCPU_REF, (ONE_VCPU_REF, TWO_VCPU, FOUR_VCPU))
    assert thread_counts(t, cpus=2) == (2,) and thread_counts(t, cpus=8) == (2, 4)
    assert scaling(1.6).best(4) == (2, 1.6)
    c = choose_learner("speed", 0.5, rollout_s=1.0, host_s=1.0, table=t, update_s=1.0, scaling=scaling(1.6))
    four = next(o for o in c.options if o.machine.instance_type == "four.xlarge")
    assert four.machine.threads == 2 and four.machine.threads_speedup == 1.6


def test_threads_slower_than_one_keep_the_update_on_one_thread() -> None:
    assert scaling(0.4).best(2) == (1, 1.0) and scaling(0.4).place(TWO_VCPU) == TWO_VCPU
    c = choose_learner("speed", 0.5, 1.0, 1.0, update_s=1.0, scaling=scaling(0.4))
    assert all(o.machine.threads == 1 for o in c.options) and not c.changed


def test_a_cost_plan_never_pays_for_vcpus_the_update_cannot_use() -> None:
    """Twice the price for the same single-thread speed: at 1.0 the 2-vCPU machine costs twice its
    1-vCPU sibling for the same iteration."""
    t = LearnerTable("test", "us-east-1", "test", ONE_VCPU_REF, (ONE_VCPU_REF, TWO_VCPU, FOUR_VCPU))
    c = choose_learner("cost", 0.5, 1.0, 1.0, table=t, update_s=1.0, scaling=scaling(1.0))
    assert c.machine == ONE_VCPU_REF


def test_the_trainer_counts_the_update_threads_speedup_on_the_modelled_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """On c7g.medium placed at a (fake) 2.0 speed-up: the update's part of the host's time
    (its CPU time, capped at the host's) at 0.6 x 2.0, the rest at 0.6; the update runs one thread here."""
    from serverless import trainer
    from serverless.iteration_clock import IterationTimes
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec, train

    fixed = IterationTimes(wall_s=1.0, host_s=0.3, host_speed=1.0, lambda_s=1.3, modelled=True)
    monkeypatch.setattr(trainer.IterationClock, "stop", lambda self, **kw: fixed)
    placed = replace(CHEAP_SLOW, threads=2, threads_speedup=2.0)
    spec = TrainSpec(env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunShape(1, 1769, 256),
                     ppo=PPOConfig(), seed=0, checkpoint_every=0, learner=placed)
    res = train(spec, progress=False)
    for r in res.iterations:
        update = min(0.3, r.learner_cpu_s)
        assert r.host_s == pytest.approx((0.3 - update) / 0.6 + update / (0.6 * 2.0))
    assert res.config["learner"]["threads"] == 2 and res.config["ppo"]["torch_threads"] == 1


@pytest.mark.parametrize("clock, threads", [("modelled", 1), ("measured", 2)])
def test_the_update_runs_the_machines_threads_only_on_a_measured_clock(monkeypatch: pytest.MonkeyPatch,
                                                                       clock: str, threads: int) -> None:
    """On the modelled clock the update runs one thread here and is credited its measured speed-up;
    on a measured clock (the learner on the planned machine) it runs the plan's threads."""
    import torch

    from serverless import trainer
    from serverless.backends import BACKENDS
    from serverless.ppo import PPOConfig
    from serverless.trainer import TrainSpec

    entry = replace(BACKENDS.get("local"), clock=clock)
    monkeypatch.setattr(trainer, "BACKENDS", type("Fake", (), {"get": staticmethod(lambda name: entry)})())
    spec = TrainSpec(env_id="CartPole-v1", target_reward=1e9, max_steps=512, run=RunShape(1, 1769, 256),
                     ppo=PPOConfig(), seed=0, checkpoint_every=0,
                     learner=replace(REF, threads=2, threads_speedup=1.6))
    before = torch.get_num_threads()
    try:
        run = trainer._Training(spec, backend=object(), probe_noise_every=0, progress=False)
        assert run.learner.config.torch_threads == threads and spec.ppo.torch_threads == 1
    finally:
        torch.set_num_threads(before)
