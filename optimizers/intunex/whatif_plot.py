"""Draw a what-if's throughput per dollar against budget as a PNG (every figure simulated)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ingestion.cluster.model import ClusterSummary
    from optimizers.intunex.whatif import BudgetPoint


def render_budget_png(points: Sequence[BudgetPoint], baselines: Mapping[str, ClusterSummary],
                      plan: ClusterSummary, path: str | Path, title: str) -> Path:
    """InTuneX's plans and the exact bound per budget (lines), the all-fed plan (star) and the baselines
    (points at their own cost)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax, share) = plt.subplots(2, 1, figsize=(7.5, 7.0), dpi=110, sharex=True,
                                    gridspec_kw={"height_ratios": (2, 1)})
    budgets = [p.budget_usd_per_h for p in points]
    ax.plot(budgets, [p.plan_throughput_per_usd for p in points], "-o", ms=4, color="tab:blue",
            label="InTuneX, most rows within the budget")
    bound = [(b, p.bound_throughput_per_usd) for b, p in zip(budgets, points) if p.bound_throughput_per_usd]
    if bound:
        ax.plot([b for b, _ in bound], [v for _, v in bound], "--", color="0.35",
                label="exact solver's best assignment (MILP, 20 s limit)")
    ax.plot([plan["usd_per_h"]], [plan["throughput_per_usd"]], "*", ms=14, color="tab:red",
            label="InTuneX, every job fed at least cost")
    markers = iter("svD^<>ph")
    for name, b in baselines.items():
        if b.get("usd_per_h"):
            fed = "" if b.get("all_fed") else " (a job unfed)"
            ax.plot([b["usd_per_h"]], [b["throughput_per_usd"]], next(markers, "x"), ms=7, label=f"{name}{fed}")
    demand = sum(j["demand_rows_per_s"] for j in plan["jobs"].values())
    share.plot(budgets, [p.plan_delivered_rows_per_s / demand for p in points], "-o", ms=4, color="tab:blue",
               label="InTuneX")
    if bound:
        share.plot(budgets, [(p.bound_delivered_rows_per_s or 0) / demand for p in points], "--", color="0.35",
                   label="bound on rows (MILP)")
    share.set_ylabel("share of demand delivered")
    share.set_ylim(0, 1.05)
    share.grid(alpha=0.3)
    share.legend(fontsize=7)
    ax.set_xscale("log")
    share.set_xlabel("budget / cost, USD per hour (on-demand prices)")
    ax.set_ylabel("rows delivered per USD (simulated)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
