"""The reference-points CLI merges runs by (batch, seed) and keeps other actor counts apart."""

import json

from optimizers.seraph import references


def _fake_measure(steps_by_seed):
    def measure(env_id, target_reward, batches, seeds, max_steps, actors=1, steps_per_env=0):
        runs = [
            {"batch": b, "seed": s, "reached": True, "env_steps": steps_by_seed[s] * b // 512, "censored": False, "wall_s": 1.0}
            for b in batches for s in seeds
        ]
        return references.summarise(
            runs, actors=actors, target_reward=target_reward, max_steps=300_000, steps_per_env=steps_per_env
        )

    return measure


def test_runs_merge_by_batch_and_seed_and_other_actor_counts_go_to_by_actors(tmp_path, monkeypatch):
    out = tmp_path / "refs.json"
    monkeypatch.setattr(references, "measure", _fake_measure({10: 1000, 11: 3000, 12: 2000, 13: 9000}))
    args = ["--env", "CartPole-v1", "--target-reward", "475", "--out", str(out)]
    references.main([*args, "--batches", "512,1024", "--seeds", "10,11,12"])
    references.main([*args, "--batches", "1024", "--seeds", "13"])  # one more seed at one batch
    references.main([*args, "--batches", "512", "--seeds", "10,11", "--actors", "4"])
    cp = json.loads(out.read_text())["envs"]["CartPole-v1"]
    assert cp["points"] == [[512, 2000], [1024, 5000.0]]  # 1,024: median of 2000, 6000, 4000, 18000
    assert len(cp["runs"]) == 7 and cp["seeds"] == [10, 11, 12, 13]
    four = cp["by_actors"]["4"]
    assert four["actors"] == 4 and four["points"] == [[512, 2000.0]]
    references.main([*args, "--batches", "512", "--seeds", "12"])  # a later 1-actor run keeps by_actors
    assert "4" in json.loads(out.read_text())["envs"]["CartPole-v1"]["by_actors"]


def test_slot_references_go_to_their_own_file_and_the_lookup_falls_back_to_the_unslotted(tmp_path, monkeypatch):
    monkeypatch.setattr(references, "REFERENCES_PATH", tmp_path / "references.json")
    monkeypatch.setattr(references, "measure", _fake_measure({10: 1000, 11: 3000, 12: 2000}))
    args = ["--env", "CartPole-v1", "--target-reward", "475", "--batches", "512", "--seeds", "10,11,12"]
    references.main(args)
    assert references.measured_reference("CartPole-v1", 128)["source"].endswith(
        "(measured without env slots; the run uses slots of 128 steps)"
    )
    references.main([*args, "--steps-per-env", "128"])
    assert references.references_path(128) == tmp_path / "references-spe128.json"
    slotted = references.measured_reference("CartPole-v1", 128)
    assert slotted["steps_per_env"] == 128 and "env slots of 128 steps" in slotted["source"]
    assert references.measured_reference("CartPole-v1", 0)["steps_per_env"] == 0
    assert references.measured_reference("Acrobot-v1", 128) is None


def test_a_negative_slot_length_is_refused(capsys):
    import pytest

    from core.errors import UserError

    with pytest.raises(UserError, match="--steps-per-env must be >= 0"):
        references.main(["--env", "CartPole-v1", "--target-reward", "475", "--batches", "512", "--steps-per-env", "-1"])


def test_the_committed_pendulum_references_cover_its_searched_batches_with_slots():
    from optimizers.seraph.pilot import batches_for, workload_for
    from optimizers.seraph.reference_points import reference_for

    workload = workload_for("Pendulum-v1", None)
    entry = references.measured_reference("Pendulum-v1", workload.steps_per_env)
    assert entry["steps_per_env"] == workload.steps_per_env == 128 and entry["target_reward"] == -200
    assert entry["seeds"] == list(range(10, 18)) and entry["max_steps"] == workload.max_steps
    assert [b for b, _ in entry["points"]] == list(batches_for(workload))
    for batch, median in entry["points"]:
        runs = [r["env_steps"] for r in entry["runs"] if r["batch"] == batch]
        assert len(runs) == 8 and min(runs) <= median <= max(runs)
    ref = reference_for("Pendulum-v1", workload.max_steps, 4096, workload.steps_per_env)
    assert ref.source.startswith("measured") and ref.actors == 1 and len(ref.runs) == len(entry["runs"])


def test_references_can_be_ignored_for_a_benchmark():
    from optimizers.seraph.baseline import STATIC_DEFAULT_CONFIG as base
    from optimizers.seraph.layout import choose_layout
    from optimizers.seraph.reference_points import reference_for
    from optimizers.seraph.references import load_references, references_ignored

    assert "CartPole-v1" in load_references(steps_per_env=128)
    with references_ignored():
        assert load_references(steps_per_env=128) == {}
        layout = choose_layout("CartPole-v1", base, 128, (512, 1024))
        assert layout.at_baseline and layout.references == "none"
        assert reference_for("CartPole-v1", 300_000, 1024, 128).source.startswith("assumed")
    assert not choose_layout("CartPole-v1", base, 128, (512, 1024)).at_baseline
