"""The ingestion optimizers' registry: what each factory is given."""

from __future__ import annotations

import optimizers.intune
from optimizers import ingestion_optimizers
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, OptimizerRequest


def test_intune_gets_the_budget_that_its_calibration_left(monkeypatch):
    """A calibration made when the factory asks for it spends the run's budget: InTune's own
    stopping rules must see what is left, or the run ends past its budget."""
    now = [1000.0]
    monkeypatch.setattr(ingestion_optimizers.time, "monotonic", lambda: now[0])
    given: dict = {}

    def fake_make(spec, node, *, time_budget_s, seed, calibration):
        given.update(time_budget_s=time_budget_s, calibration=calibration)
        return "optimizer"

    monkeypatch.setattr(optimizers.intune, "make_intune_optimizer", fake_make)

    def calibrate_slowly():
        now[0] += 63.0
        return "calibration"

    req = OptimizerRequest("spec", "node", 180.0, 0, calibrate_slowly)
    assert INGESTION_OPTIMIZERS.get("intune").factory(req) == "optimizer"
    assert given == {"time_budget_s": 117.0, "calibration": "calibration"}
