"""benchmarks/seraph_cost_floor.py: the per-step cost bound against the static default."""

import json

import pytest

from benchmarks import seraph_cost_floor
from optimizers.seraph import workload_profile as profiles
from optimizers.seraph.workload_profile import PilotSummary, Profile, ProfileNoise
from optimizers.seraph.pilot import workload_for
from tests.optimizers.seraph.test_workload_profile import synthetic_observations


def _profile_file(tmp_path):
    obs = synthetic_observations(levels=((885, 1500.0), (1769, 3000.0)), batches=(2048, 4096))
    p = Profile(workload=workload_for("CartPole-v1", None).key_dict(), backend="local", hardware=profiles.hardware_fingerprint(),
                observations=obs, noise=ProfileNoise(b_noise=250.0), pilot=PilotSummary(), memory_sweep=[885, 1769])
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(p.as_dict()))
    return path


def test_the_floor_is_under_every_shape_and_the_bar_asks_fewer_env_steps_below_it(tmp_path, capsys):
    out = tmp_path / "floor.json"
    assert seraph_cost_floor.main(["--profile", str(_profile_file(tmp_path)), "--json-out", str(out)]) == 0
    res = json.loads(out.read_text())
    floor, best, static = res["floor"], res["cheapest_shape"], res["static_default"]
    assert floor["usd_per_step"] <= best["usd_per_step"] <= static["usd_per_step"]
    assert min(r["usd_per_step"] for r in res["cheapest_by_batch"]) == pytest.approx(best["usd_per_step"])
    # the env-step share a plan needs is the bar over its per-step ratio: larger where steps are cheaper
    assert best["env_steps_share_needed_for_bar"] == pytest.approx(0.7 / best["vs_static"])
    assert floor["env_steps_share_needed_for_bar"] >= best["env_steps_share_needed_for_bar"]
    assert "MODELLED" in capsys.readouterr().out


def test_an_unreadable_profile_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(SystemExit, match="not a readable Seraph profile"):
        seraph_cost_floor.main(["--profile", str(bad)])
    with pytest.raises(SystemExit, match="not a readable Seraph profile"):
        seraph_cost_floor.main(["--profile", str(tmp_path / "missing.json")])
    other = json.loads(_profile_file(tmp_path).read_text())
    del other["workload"]["max_steps"]
    bad.write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="lacks max_steps"):
        seraph_cost_floor.main(["--profile", str(bad)])


@pytest.mark.parametrize("shape", ["2x1769", "2x1769x0", "twoxbig"])
def test_a_malformed_static_shape_names_the_format(tmp_path, capsys, shape):
    with pytest.raises(SystemExit):
        seraph_cost_floor.main(["--profile", str(_profile_file(tmp_path)), "--static", shape])
    assert "ACTORSxMEMORY_MBxBATCH" in capsys.readouterr().err
