"""Draw the predicted time-vs-cost Pareto front of a plan as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from core.atomic import save_figure


def render_pareto_png(plan: Mapping[str, Any], path: str | Path, *, all_points: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Plot every scored shape (grey), the Pareto front (line) and the chosen shape.

    ``plan`` is :meth:`Plan.as_dict` output; ``all_points`` optionally the full
    candidate list (``Candidate.as_dict`` rows). Both axes are modelled figures.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    if all_points:
        ax.scatter(
            [p["predicted_time_s"] for p in all_points],
            [p["predicted_cost_usd"] for p in all_points],
            s=8, c="0.75", label="all shapes",
        )
    front = plan.get("pareto_front") or []
    if front:
        ax.plot(
            [p["predicted_time_s"] for p in front],
            [p["predicted_cost_usd"] for p in front],
            "-o", ms=4, color="tab:blue", label="Pareto front",
        )
        for p in front:
            ax.annotate(
                f"{p['actors']}x{p['memory_mb']}MB/b{p['batch']}",
                (p["predicted_time_s"], p["predicted_cost_usd"]),
                fontsize=6, xytext=(3, 3), textcoords="offset points",
            )
    pred = plan.get("predicted")
    if pred:
        ax.plot([pred["time_s"]], [pred["cost_usd"]], "*", ms=14, color="tab:red", label=f"chosen ({plan['objective']})")
    c = plan.get("constraints") or {}
    if c.get("deadline_s"):
        ax.axvline(c["deadline_s"], ls="--", color="tab:orange", label="deadline")
    if c.get("budget_usd"):
        ax.axhline(c["budget_usd"], ls="--", color="tab:green", label="budget")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time to target, s (modelled Lambda clock)")
    ax.set_ylabel("cost to target, USD (modelled, price table)")
    ax.set_title("Seraph: predicted time vs cost to the target reward")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path
