"""The layout chosen before the pilot: the baseline's unless references show significantly fewer env steps."""

from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG
from serverless.run_shape import RunShape
from optimizers.seraph.layout import choose_layout, reference_runs

CARTPOLE_BATCHES = (512, 1024, 2048, 4000, 8000)
LUNAR_BATCHES = (2048, 4000, 8192, 16384, 32768)


def test_cartpole_leaves_the_static_default_for_slots_its_references_show_need_fewer_steps():
    layout = choose_layout("CartPole-v1", STATIC_DEFAULT_CONFIG, 128, CARTPOLE_BATCHES)
    assert not layout.at_baseline and (layout.batch, layout.steps_per_env) == (1024, 128)
    assert layout.p_value < 0.05 and layout.slot_runs.median < layout.baseline_runs.median
    assert layout.references == "measured"


def test_lunarlander_stays_at_the_static_default_when_no_layout_is_significantly_better():
    layout = choose_layout("LunarLander-v3", STATIC_DEFAULT_CONFIG, 128, LUNAR_BATCHES)
    assert layout.at_baseline and (layout.batch, layout.steps_per_env) == (4000, 2000)
    assert layout.p_value >= 0.05 and "none fewer" in layout.reason
    assert layout.baseline_env_steps == reference_runs("LunarLander-v3", 4000, 2000).median


def test_without_references_the_baseline_layout_is_kept_and_says_so():
    layout = choose_layout("Acrobot-v1", STATIC_DEFAULT_CONFIG, 128, (500, 1000, 2000, 4000))
    assert layout.at_baseline and layout.references == "none" and layout.as_dict()["references"] == "none"


def test_a_baseline_without_its_own_references_is_kept_even_when_slots_have_some():
    unmeasured = RunShape(4, 1769, 4000, 1000)
    layout = choose_layout("CartPole-v1", unmeasured, 128, CARTPOLE_BATCHES)
    assert layout.at_baseline and (layout.batch, layout.steps_per_env) == (4000, 1000)
    assert "no reference runs at it" in layout.reason


def test_every_slot_length_with_committed_references_is_a_candidate():
    """Pendulum's references at slots of 1,024 need fewer env steps than the static default's
    layout (rank-sum p < 0.05); slots of 128 do not: Seraph takes the longer slots, and the
    search keeps to the batches their runs cover."""
    from optimizers.seraph.references import reference_slot_lengths
    from optimizers.seraph.job import SeraphJob
    from optimizers.seraph.request import SeraphRequest

    assert {128, 1024, 2000} <= set(reference_slot_lengths("Pendulum-v1"))
    layout = choose_layout("Pendulum-v1", STATIC_DEFAULT_CONFIG, 128, (1024, 2048, 4000, 4096, 8192, 16384))
    assert not layout.at_baseline and layout.steps_per_env == 1024 and layout.batch in (1024, 2048)
    assert layout.p_value < 0.05 and layout.slot_runs.median < layout.baseline_runs.median
    assert layout.batches == (1024, 2048)
    workload = SeraphJob.of(SeraphRequest("Pendulum-v1", -200)).workload
    assert (workload.steps_per_env, workload.batches) == (1024, (1024, 2048))
