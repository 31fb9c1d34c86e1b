"""The ingestion optimizers' registry: what each factory is given."""

from __future__ import annotations

import optimizers.intune
from core.budget import Budget
from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS, IngestJob


def test_intune_gets_the_budget_that_its_calibration_left(monkeypatch):
    """A calibration made when the factory asks for it spends the job's budget: InTune's own
    stopping rules must see what is left, or the run ends past its budget."""
    now = [1000.0]
    given: dict = {}

    def fake_make(spec, node, *, budget, seed, calibration, settings):
        given.update(remaining_s=budget.remaining(), calibration=calibration)
        return "optimizer"

    monkeypatch.setattr(optimizers.intune, "make_intune_optimizer", fake_make)

    def calibrate_slowly():
        now[0] += 63.0
        return "calibration"

    job = IngestJob("spec", "node", Budget.start(180.0, clock=lambda: now[0]), 0, calibrate_slowly)
    assert INGESTION_OPTIMIZERS.get("intune").factory(job) == "optimizer"
    assert given == {"remaining_s": 117.0, "calibration": "calibration"}
