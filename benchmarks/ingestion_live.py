"""InTune vs baselines on the real tf.data DLRM pipeline, side by side in one run.

    flock /tmp/trainwise-bench.lock .venv/bin/python -m benchmarks.ingestion_live \\
        --formats tsv,tfrecord --json-out runs/ingestion-bench.json

For each data format (synthetic Criteo, 200,000 rows by default, generated once under
``.trainwise/bench-data``):

1. every optimizer tunes the same pipeline on this machine with the same measurement
   (``optimizers.tuning.tune_pipeline``: live trials in one worker subprocess);
   searchers get ``--time-budget-s`` (180 s), the grid gets as long as it needs;
2. **side by side**: every optimizer's chosen configuration is re-measured in
   round-robin rounds in one worker (so load changes on a shared machine hit all of
   them alike), ``--rounds`` rounds of (warm-up 4 s, 3 windows of 3 s); the median over
   rounds is the optimizer's rows/s, reported also as ratios to AUTOTUNE and to the grid
   oracle. A configuration chosen under several names is measured once per round and
   every name gets its figure;
3. **the oracle is not a noise winner**: the grid measures each of its configurations once,
   briefly, so its best short trial may be a lucky one. Its top ``--oracle-top`` (5)
   configurations by that grid measurement join the side-by-side rounds and are measured
   exactly like every optimizer's pick (same worker, windows and repeats); the oracle (the
   grid's reported pick) is the best of them *as re-measured side by side*, i.e. the best
   measured configuration of the grid under the same measurement as everything compared
   with it (``result["oracle"]`` lists the candidates, their grid and side-by-side figures).
   Nor is its *figure* a noise winner: the best of five near-equal medians is biased up, so
   the oracle's rows/s (the denominator of every ``vs_oracle``) is its pick's figure in rounds
   that did not pick it (leave one round out, :func:`held_out_best`; needs ``--rounds`` >= 2).
   The biased figure stays beside it (``best_median_rows_per_s``, ``vs_oracle_best_median``);
4. **simulator error**: the calibrated simulator's throughput for every grid
   configuration against the grid's live measurement (|sim - measured| / measured), twice:
   *as calibrated* (the calibration made before InTune ran, minutes before the grid) and
   *re-anchored before the grid* (``ingestion.calibrate.reanchor``: right before the grid, in
   the grid's worker, the calibration's base configuration is measured ``--reanchor-samples``
   (5) times with the calibration's own protocol and the model's level is moved to their
   median; knob effects kept). Nothing is fitted to the grid's measurements;
4b. **drift during the grid**: a control measurement of that base configuration (grid
   protocol) before every ``--control-every`` (10) grid points and after the last
   (``TuningOptions(control=...)``). The controls are reported (``drift``), never used to
   rescale a measured rows/s; per block of grid points between two controls the
   re-anchored model's signed error is listed beside the controls, to show how much of the
   error follows the machine;
4c. **several grid passes** (``--grid-passes N``, default 1): the grid is measured N times in
   the same worker, each pass in the reverse order of the one before (forward, reversed,
   forward, ...), with its controls every ``--control-every`` points in every pass. A
   configuration's grid figure is then the **mean** of its passes' measurements (each pass's
   figure stays in ``rows_per_s_passes``); an OOM in any pass makes it OOM. The mean, not the
   median: with an even N in alternating order a configuration measured early in one pass is
   measured late in the next, so a linear drift of the machine cancels exactly in the mean
   (the median of two is the mean anyway, and for N >= 3 it would keep one pass's drift). The
   simulator errors (1 and both models of 4), the oracle's top candidates (3) and the drift
   report (4b) use the combined figure; ``result["grid_passes"]`` gives the spread between
   passes and the simulator error against each pass alone. The grid's ``tuning_s`` is the total
   of all passes (and their controls), ``trials`` the number of grid measurements, and
   ``--grid-budget-s`` applies to each pass. Still nothing is fitted to the grid's measurements;
5. the simulated part (other node sizes) from ``benchmarks.ingestion_sim.run_simulated``.

Figures from the live pipeline are labelled ``measured``; the simulator's ``simulated``.
The bars checked at the end: InTune >= 1.5x AUTOTUNE, >= 0.95x the oracle, found within
180 s; simulator error over the grid below 15% (mean; checked for both the as-calibrated and the
re-anchored model, each bar line says which).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import machine_state, print_table, progress, ratio, write_result

# Every registered ingestion optimizer, the single-configuration ones first and the grid last
# (it takes the longest and its history serves as the oracle).
_FIRST = ("naive", "heuristic", "autotune")


def all_optimizers() -> tuple[str, ...]:
    from optimizers.ingestion_optimizers import INGESTION_OPTIMIZERS

    names = INGESTION_OPTIMIZERS.names()
    rest = [n for n in names if n not in _FIRST and n != "grid"]
    return (*[n for n in _FIRST if n in names], *rest, *(["grid"] if "grid" in names else []))


def _ensure_data(root: Path, fmt: str, rows: int, seed: int) -> Path:
    from ingestion.datagen import MANIFEST, generate

    d = root / f"criteo-{rows}-{fmt}-seed{seed}"
    if not (d / MANIFEST).exists():
        progress(f"generating {rows:,} rows of {fmt} into {d}")
        generate(rows, fmt, d, seed=seed)
    return d


def _calibration(spec: Any, node: Any) -> Any:
    from ingestion.calibrate import calibrate

    return calibrate(spec, node)


def _model_of(calibration: Any) -> Any:
    """The simulator's PipelineModel inside whatever ``calibrate`` returned."""
    from ingestion.simulator import PipelineModel

    if isinstance(calibration, PipelineModel):
        return calibration
    for attr in ("model", "pipeline_model"):
        if isinstance(getattr(calibration, attr, None), PipelineModel):
            return getattr(calibration, attr)
    if isinstance(calibration, dict) and isinstance(calibration.get("model"), PipelineModel):
        return calibration["model"]
    raise TypeError(f"cannot find a PipelineModel in the calibration ({type(calibration).__name__})")


def side_by_side(spec: Any, node: Any, chosen: dict[str, dict[str, int]], rounds: int) -> dict[str, dict[str, Any]]:
    """Measure every chosen configuration in round-robin rounds, every other round in the
    reverse order (against drift); medians per name. A configuration chosen under several
    names is measured once per round and shared."""
    from ingestion.measure import MeasureWorker
    from optimizers.tuning import FINAL_PROTOCOL

    distinct: dict[tuple, dict[str, int]] = {}
    for config in chosen.values():
        distinct.setdefault(_key(config), config)
    runs: dict[tuple, list[Any]] = {k: [] for k in distinct}
    with MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) as w:
        for r in range(rounds):
            order = list(distinct.items()) if r % 2 == 0 else list(distinct.items())[::-1]
            for k, config in order:
                m = w.measure(config, **FINAL_PROTOCOL.as_kwargs())
                runs[k].append(m)
                names = ", ".join(n for n, c in chosen.items() if _key(c) == k)
                progress(f"  round {r + 1}/{rounds} {names}: {m.rows_per_s:,.0f} rows/s, {m.peak_rss_mb:,.0f} MB")
    return {name: _summarise(runs[_key(config)]) for name, config in chosen.items()}


def _key(config: dict[str, int]) -> tuple:
    return tuple(sorted(config.items()))


def _summarise(ms: list[Any]) -> dict[str, Any]:
    """Median rows/s over the side-by-side rounds of one configuration, its spread and memory."""
    rates = [m.rows_per_s for m in ms]
    median = statistics.median(rates)
    return {
        "rows_per_s": median,
        "rows_per_s_rounds": rates,
        "spread": (max(rates) - min(rates)) / median if median else None,
        "peak_rss_mb": max(m.peak_rss_mb for m in ms),
        "pipeline_rss_mb": max(float(m.extra.get("pipeline_rss_mb", 0.0)) for m in ms),
        "oom": any(m.failed for m in ms),
        "label": "measured",
    }


def grid_top(grid_history: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The grid's ``n`` best configurations by their (short, noisy) grid measurement."""
    ran = [t for t in grid_history if not t["oom"] and t["rows_per_s"] > 0]
    return sorted(ran, key=lambda t: -t["rows_per_s"])[:n]


def combine_passes(histories: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One grid history from several passes' (each in the order that pass measured): per
    configuration, in the first pass's order, the mean rows/s of its passes (why the mean: module
    doc, 4c), OOM if any pass ran out of memory (rows/s 0 then), the largest peak RSS, and each
    pass's figure (``rows_per_s_passes``), OOM flag and position in its pass (``pass_trials``).
    A configuration a pass did not reach (its budget ran out) is combined over the passes that
    measured it."""
    by_pass = [{_key(t["config"]): (i, t) for i, t in enumerate(h)} for h in histories]
    combined = []
    for t in histories[0]:
        measured = [index[_key(t["config"])] for index in by_pass if _key(t["config"]) in index]
        oom = any(m["oom"] for _, m in measured)
        rates = [m["rows_per_s"] for _, m in measured]
        combined.append({
            "config": t["config"],
            "rows_per_s": 0.0 if oom else statistics.fmean(rates),
            "peak_rss_mb": max(m["peak_rss_mb"] for _, m in measured),
            "oom": oom,
            "label": next((m["label"] for _, m in measured if m["oom"]), t["label"]),
            "rows_per_s_passes": rates,
            "oom_passes": [m["oom"] for _, m in measured],
            "pass_trials": [i for i, _ in measured],
            **{f"{k}_passes": [m.get(k) for _, m in measured] for k in ("cores_busy", "other_cores_busy")
               if any(m.get(k) is not None for _, m in measured)},
        })
    return combined


def pass_spread(history: list[dict[str, Any]]) -> dict[str, Any]:
    """How far a grid configuration's passes lie apart: (max - min) / mean of its passes' rows/s
    (|pass 1 - pass 2| / mean with two passes), over the configurations measured in two passes or
    more and never out of memory; and per pass the median ratio of its figure to pass 1's (the
    machine's level in that pass against the first)."""
    ran = [t["rows_per_s_passes"] for t in history
           if len(t.get("rows_per_s_passes", [])) > 1 and not t["oom"] and min(t["rows_per_s_passes"]) > 0]
    spreads = [(max(r) - min(r)) / statistics.fmean(r) for r in ran]
    passes = max((len(r) for r in ran), default=0)
    return {
        "label": "measured",
        "configs": len(spreads),
        "median_rel_spread": statistics.median(spreads) if spreads else None,
        "mean_rel_spread": statistics.fmean(spreads) if spreads else None,
        "max_rel_spread": max(spreads) if spreads else None,
        "median_over_pass1": [statistics.median(r[k] / r[0] for r in ran if len(r) > k) for k in range(passes)],
    }


def grid_passes_report(spec: Any, node: Any, history: list[dict[str, Any]], models: dict[str, Any]) -> dict[str, Any]:
    """The spread between the grid's passes (:func:`pass_spread`) and, as a diagnostic, each
    model's simulator error against every pass alone: what a single pass would have reported."""
    passes = max(len(t["rows_per_s_passes"]) for t in history)
    by_model = {}
    for name, model in models.items():
        by_model[name] = []
        for k in range(passes):
            alone = [{"config": t["config"], "rows_per_s": t["rows_per_s_passes"][k], "oom": t["oom_passes"][k]}
                     for t in history if len(t["rows_per_s_passes"]) > k]
            se = simulator_error(spec, node, model, alone)
            by_model[name].append({"pass": k + 1, "mean_rel_error": se["mean_rel_error"],
                                   "median_rel_error": se["median_rel_error"]})
    return {"passes": passes, "spread": pass_spread(history),
            "simulator_error_by_pass": {"label": "diagnostic (each pass alone; the bar uses the mean of the passes)",
                                        **by_model}}


def pick_oracle(top: list[dict[str, Any]], final: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The oracle: of the grid's top configurations, the best as re-measured side by side
    (``chosen``, ``config``), and its throughput estimated on rounds that did not choose it
    (``rows_per_s``; see :func:`held_out_best`). ``best_median_rows_per_s`` is the chosen
    configuration's median over all rounds, which picked it: biased up, kept for comparison."""
    candidates = [{"name": f"grid-top{i + 1}", "config": t["config"], "grid_rows_per_s": t["rows_per_s"],
                   "side_by_side_rows_per_s": final[f"grid-top{i + 1}"]["rows_per_s"],
                   "side_by_side_rounds": final[f"grid-top{i + 1}"]["rows_per_s_rounds"]} for i, t in enumerate(top)]
    best = max(candidates, key=lambda c: c["side_by_side_rows_per_s"])
    held_out = held_out_best(candidates)
    return {"rule": "best side-by-side median of the grid's top configurations by grid measurement",
            "chosen": best["name"], "config": best["config"], "candidates": candidates, "label": "measured",
            "best_median_rows_per_s": best["side_by_side_rows_per_s"],
            "rows_per_s": held_out["rows_per_s"] if held_out else best["side_by_side_rows_per_s"],
            "estimate": held_out or {"rule": "the best median itself (one round: no round to hold out; biased up)"}}


def held_out_best(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The throughput of the best candidate, measured on rounds that did not pick it.

    The best of several near-equal configurations' medians is biased up (the winner's curse:
    the maximum of noisy figures favours whichever had a lucky round), so the ratio of any
    other configuration to it is biased down, even to an equally good one. Leave one round
    out: for each side-by-side round, the candidate with the best median over the *other*
    rounds is picked, and its figure *in that round* is taken; the estimate is the median
    of those figures (every optimizer's figure is a median over rounds too). No figure both
    picks and scores a configuration, so the estimate is free of that bias. It estimates the
    throughput of the grid's pick (made from one round fewer), which is what "the oracle"
    means in a ratio; when that pick is wrong it is below the best configuration's, so it is
    not an upper bound. None with fewer than two rounds."""
    rounds = min((len(c["side_by_side_rounds"]) for c in candidates), default=0)
    if rounds < 2:
        return None
    picks = []
    for r in range(rounds):
        def others(c: dict[str, Any], r: int = r) -> float:
            return statistics.median(x for i, x in enumerate(c["side_by_side_rounds"][:rounds]) if i != r)
        best = max(candidates, key=others)
        picks.append({"round": r + 1, "chosen": best["name"], "rows_per_s": best["side_by_side_rounds"][r]})
    return {"rule": "leave one round out: each round scores the candidate the other rounds pick; median over rounds",
            "rows_per_s": statistics.median(p["rows_per_s"] for p in picks), "picks": picks, "label": "measured"}


def simulator_error(spec: Any, node: Any, calibration: Any, grid_history: list[dict[str, Any]]) -> dict[str, Any]:
    """|simulated - measured| / measured over the grid's live trials (``pairs`` in grid order,
    each with its trial index ``trial``; with several grid passes also ``pass_trials``, its
    position in each pass)."""
    from ingestion.simulator import simulate

    model = _model_of(calibration)
    errors = []
    pairs = []
    for i, t in enumerate(grid_history):
        if t["oom"] or t["rows_per_s"] <= 0:
            continue
        sim = simulate(model, t["config"], node)
        err = abs(sim.rows_per_s - t["rows_per_s"]) / t["rows_per_s"]
        errors.append(err)
        other = _other_cores(t)
        pairs.append({"config": t["config"], "trial": i, "measured_rows_per_s": t["rows_per_s"],
                      "simulated_rows_per_s": sim.rows_per_s, "rel_error": err,
                      **({"pass_trials": t["pass_trials"]} if "pass_trials" in t else {}),
                      **({"other_cores_busy": other} if other is not None else {})})
    measured_best = max(pairs, key=lambda p: p["measured_rows_per_s"]) if pairs else None
    sim_best = max(pairs, key=lambda p: p["simulated_rows_per_s"]) if pairs else None
    return {
        "configs": len(errors),
        "mean_rel_error": statistics.fmean(errors) if errors else None,
        "median_rel_error": statistics.median(errors) if errors else None,
        "max_rel_error": max(errors) if errors else None,
        "model_low_on": sum(1 for p in pairs if p["simulated_rows_per_s"] < p["measured_rows_per_s"]),
        "sim_best_config_measured_rows_per_s": sim_best["measured_rows_per_s"] if sim_best else None,
        "measured_best_rows_per_s": measured_best["measured_rows_per_s"] if measured_best else None,
        **({"by_other_load": by_other_load(pairs)} if any("other_cores_busy" in p for p in pairs) else {}),
        "pairs": pairs,
    }


#: A grid measurement during which other processes kept at least this many cores busy (the most
#: busy of its passes) counts as disturbed in :func:`by_other_load`.
OTHER_LOAD_CORES = 0.25


def _other_cores(t: dict[str, Any]) -> float | None:
    """The most cores other processes kept busy during a grid configuration's measurement(s)."""
    values = [x for x in t.get("other_cores_busy_passes", [t.get("other_cores_busy")]) if x is not None]
    return max(values) if values else None


def by_other_load(pairs: list[dict[str, Any]], threshold: float = OTHER_LOAD_CORES) -> dict[str, Any]:
    """A diagnostic, not the bar figure: the simulator error over the grid points measured while
    other processes kept fewer than ``threshold`` cores busy (every pass) and over the rest. On
    this 2-core machine another session's job takes a whole core from the pipeline even at nice
    19 (sched_autogroup shares the cores between sessions), so a disturbed point measures a
    pipeline that had about one core, not the node the model describes."""
    def summary(group: list[dict[str, Any]]) -> dict[str, Any]:
        errs = [p["rel_error"] for p in group]
        return {"configs": len(errs), "mean_rel_error": statistics.fmean(errs) if errs else None,
                "model_low_on": sum(1 for p in group if p["simulated_rows_per_s"] < p["measured_rows_per_s"])}

    known = [p for p in pairs if p.get("other_cores_busy") is not None]
    return {"label": "diagnostic (split by other processes' load; the bar uses every point)",
            "threshold_cores": threshold,
            "quiet": summary([p for p in known if p["other_cores_busy"] < threshold]),
            "disturbed": summary([p for p in known if p["other_cores_busy"] >= threshold])}


def drift_report(calibration: Any, reanchored: Any, controls: list[dict[str, Any]],
                 reanchored_error: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the machine's speed did, from measurements of the calibration's base configuration
    only: at calibration (its base samples), right before the grid (the re-anchor's samples, same
    protocol) and during the grid (the controls, grid protocol). With the re-anchored model's
    error per block of grid points between two controls (a diagnostic: nothing is rescaled)."""
    record = reanchored.reanchors[-1] if getattr(reanchored, "reanchors", None) else {}
    base = [x for x in getattr(calibration, "base_samples", []) if x > 0]
    ran = [c for c in controls if not c["oom"] and c["rows_per_s"] > 0]
    rates = [c["rows_per_s"] for c in ran]
    out: dict[str, Any] = {
        "label": "measured",
        "calibration_base_rows_per_s": base,
        "calibration_anchor_rows_per_s": statistics.median(base) if base else None,
        "reanchor": record,
        # > 1: the machine ran faster right before the grid than during calibration
        "reanchor_level_factor": record.get("level_factor"),
        "controls": controls,
        "controls_max_over_min": max(rates) / min(rates) if rates else None,
        "controls_last_over_first": rates[-1] / rates[0] if len(rates) > 1 else None,
        "controls_median_rows_per_s": statistics.median(rates) if rates else None,
        # the grid protocol's level of the base configuration against the re-anchor's (calibration
        # protocol), back to back in one worker: protocol difference plus noise
        "first_control_over_reanchor": (rates[0] / record["level_after"]
                                        if rates and record.get("level_after") else None),
    }
    if reanchored_error and reanchored_error.get("pairs") and ran:
        blocks = []
        by_pass = _controls_by_pass(controls)
        for k, pass_controls in by_pass.items():
            edges = [c["before_trial"] for c in pass_controls]
            for lo, hi, c0, c1 in zip(edges, edges[1:], pass_controls, pass_controls[1:]):
                block = [p for p in reanchored_error["pairs"] if lo <= _pass_trial(p, k) < hi]
                if not block:
                    continue
                signed = [p["simulated_rows_per_s"] / p["measured_rows_per_s"] - 1.0 for p in block]
                blocks.append({**({"pass": k} if len(by_pass) > 1 else {}),
                               "trials": [lo, hi], "control_before": c0["rows_per_s"], "control_after": c1["rows_per_s"],
                               "mean_abs_error": statistics.fmean(abs(x) for x in signed),
                               "mean_signed_error": statistics.fmean(signed)})
        out["blocks"] = blocks
    return out


def _controls_by_pass(controls: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The controls of each grid pass (1, 2, ...), in the order measured; a single-pass run's
    controls carry no ``pass`` and are pass 1."""
    out: dict[int, list[dict[str, Any]]] = {}
    for c in controls:
        out.setdefault(c.get("pass", 1), []).append(c)
    return out


def _pass_trial(pair: dict[str, Any], k: int) -> float:
    """The position of a grid pair's measurement in pass ``k`` (inf if that pass did not measure it)."""
    positions = pair.get("pass_trials", [pair["trial"]])
    return positions[k - 1] if k <= len(positions) else float("inf")


def control_tracked_error(anchor: float, pairs: list[dict[str, Any]], controls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A diagnostic, not a bar figure: the as-calibrated model's error over the grid with its
    level moved, point by point, to the control measurements (the base configuration measured
    before every 10th grid point), interpolated linearly between the two controls around each
    point; ``anchor`` is the calibration's level of the base configuration. With several grid
    passes the level of a point is the mean of its interpolated levels in the passes (as its
    figure is the mean of its passes' measurements). It uses no grid measurement, but each
    control is one short measurement (as noisy as a grid point), so it shows how much of the
    error is the machine's level, not a better model."""
    ran = {k: sorted((c for c in cs if not c["oom"] and c["rows_per_s"] > 0), key=lambda c: c["before_trial"])
           for k, cs in _controls_by_pass(controls).items()}
    if any(len(cs) < 2 for cs in ran.values()) or not ran or anchor <= 0:
        return None
    errors = []
    for p in pairs:
        levels = [_level_at(cs, _pass_trial(p, k)) for k, cs in ran.items() if _pass_trial(p, k) != float("inf")]
        level = statistics.fmean(levels)
        errors.append(abs(p["simulated_rows_per_s"] * level / anchor - p["measured_rows_per_s"]) / p["measured_rows_per_s"])
    return {"label": "diagnostic (model level from the controls; not the bar figure)",
            "mean_rel_error": statistics.fmean(errors), "median_rel_error": statistics.median(errors)}


def _level_at(controls: list[dict[str, Any]], i: float) -> float:
    """The controls' level at grid point ``i`` of their pass: linear between the two around it."""
    lo = max((c for c in controls if c["before_trial"] <= i), key=lambda c: c["before_trial"], default=controls[0])
    hi = min((c for c in controls if c["before_trial"] > i), key=lambda c: c["before_trial"], default=controls[-1])
    span = hi["before_trial"] - lo["before_trial"]
    w = (i + 0.5 - lo["before_trial"]) / span if span > 0 else 0.0
    return lo["rows_per_s"] * (1.0 - w) + hi["rows_per_s"] * w


def rescore(path: Path) -> None:
    """Print the oracle, simulator errors, drift and grid passes of a saved result (no
    measurement). The oracle's held-out figure is recomputed from the saved side-by-side
    rounds, so results saved before it existed get it too."""
    import json

    for f in json.loads(path.read_text()).get("real", []):
        print(f"{f['format']}: {oracle_line(f)}")
        for key in ("simulator_error", "simulator_error_reanchored"):
            se = f.get(key) or {}
            if se.get("mean_rel_error") is not None:
                print(f"{f['format']}: {se.get('model', 'as calibrated')}: mean {se['mean_rel_error']:.1%}, "
                      f"median {se['median_rel_error']:.1%}")
                if se.get("by_other_load"):
                    print(f"{f['format']}:   {other_load_line(se['by_other_load'])}")
        d = f.get("drift")
        if d:
            tracked = control_tracked_error(d["calibration_anchor_rows_per_s"] or 0.0,
                                            f["simulator_error"]["pairs"], d["controls"])
            print(f"{f['format']}: controls max/min {d['controls_max_over_min']:.2f}, re-anchor x{d['reanchor_level_factor']:.2f}"
                  + (f"; {tracked['label']}: mean {tracked['mean_rel_error']:.1%}, median {tracked['median_rel_error']:.1%}"
                     if tracked else ""))
        if f.get("grid_passes"):
            print(f"{f['format']}: {passes_line(f['grid_passes'])}")


def oracle_line(result: dict[str, Any]) -> str:
    """One line on a format's oracle: its best median and its held-out figure (measured), and
    InTune's ratio to each."""
    candidates = (result.get("oracle") or {}).get("candidates")
    if not candidates:
        return "oracle: none (no grid)"
    best = max(c["side_by_side_rows_per_s"] for c in candidates)
    held = held_out_best(candidates)
    it = next((r.get("rows_per_s") for r in result.get("results", []) if r.get("optimizer") == "intune"), None)

    def vs(x: float | None) -> str:
        return f" (InTune {it / x:.3f}x)" if it and x else ""
    return (f"oracle best median {best:,.0f} rows/s{vs(best)}; "
            + (f"held out {held['rows_per_s']:,.0f}{vs(held['rows_per_s'])}, picks "
               f"{[p['chosen'] for p in held['picks']]}" if held else "held out: n/a (one round)"))


def other_load_line(report: dict[str, Any]) -> str:
    """One line of :func:`by_other_load` (a diagnostic)."""
    def part(name: str) -> str:
        g = report[name]
        return (f"{name} {g['configs']} points: mean {g['mean_rel_error']:.1%}, low on {g['model_low_on']}"
                if g["configs"] else f"{name}: none")
    return (f"diagnostic, by other processes' load (< {report['threshold_cores']} cores busy in every pass): "
            f"{part('quiet')}; {part('disturbed')}")


def passes_line(report: dict[str, Any]) -> str:
    """One line on the grid's passes (measured): their spread and each pass's simulator error alone."""
    sp = report["spread"]
    alone = "; ".join(f"{model}: " + ", ".join(f"pass {e['pass']} {e['mean_rel_error']:.1%}" for e in errors)
                      for model, errors in report["simulator_error_by_pass"].items() if model != "label")
    return (f"{report['passes']} grid passes (measured): |max - min| / mean of a configuration's passes, median "
            f"{sp['median_rel_spread'] or 0:.1%} (mean {sp['mean_rel_spread'] or 0:.1%}, max {sp['max_rel_spread'] or 0:.1%}) "
            f"over {sp['configs']} configurations; pass / pass 1 median {[round(x, 3) for x in sp['median_over_pass1']]}"
            + (f"; simulator mean error against each pass alone: {alone}" if alone else ""))


def run_format(fmt: str, args: argparse.Namespace, node: Any) -> dict[str, Any]:
    from ingestion.dlrm import dlrm_spec
    from optimizers.tuning import IngestJob, TuningOptions, tune_pipeline
    from core.errors import UserError

    data = _ensure_data(Path(args.data_root), fmt, args.rows, args.seed)
    spec = dlrm_spec(str(data), fmt, node)
    calibration_cache: dict[str, Any] = {}

    def calibration() -> Any:
        if "c" not in calibration_cache:
            calibration_cache["c"] = _calibration(spec, node)
        return calibration_cache["c"]

    tuned: dict[str, dict[str, Any]] = {}
    reanchored: dict[str, Any] = {}
    for name in args.optimizers:
        budget = args.grid_budget_s if name == "grid" else args.time_budget_s
        progress(f"[{fmt}] tuning with {name} (budget {budget:.0f} s)")
        try:
            if name == "grid" and (args.grid_passes > 1 or (spec.portable and args.control_every > 0)):
                tuned[name] = _grid_with_controls(spec, node, args, calibration(), reanchored, budget)
            else:
                job = IngestJob.create(spec, node, time_budget_s=budget, seed=args.seed, final=None,
                                       calibration=calibration)
                tuned[name] = tune_pipeline(job, name, TuningOptions(progress=args.verbose)).to_json()
        except UserError as exc:
            progress(f"[{fmt}] {name} not run: {exc}")
            tuned[name] = {"error": str(exc)}
            continue
        t = tuned[name]
        progress(f"[{fmt}] {name}: {t['search']['trials']} trials in {t['tuning_s']:.0f} s -> {t['config']}")

    chosen = {n: t["config"] for n, t in tuned.items() if "config" in t and n != "grid"}
    top = grid_top(tuned["grid"]["search"]["history"], args.oracle_top) if "config" in tuned.get("grid", {}) else []
    chosen.update({f"grid-top{i + 1}": t["config"] for i, t in enumerate(top)})
    progress(f"[{fmt}] side by side: {len(chosen)} picks ({len({_key(c) for c in chosen.values()})} distinct "
             f"configurations) x {args.rounds} rounds")
    final = side_by_side(spec, node, chosen, args.rounds)
    oracle_pick = pick_oracle(top, final) if top else None
    if oracle_pick is not None:
        progress(f"[{fmt}] oracle: {oracle_pick['chosen']} {oracle_pick['config']}")
        tuned["grid"]["config"] = oracle_pick["config"]
        # the grid's figure is its pick's throughput on rounds that did not pick it (pick_oracle)
        final["grid"] = {**final[oracle_pick["chosen"]], "rows_per_s": oracle_pick["rows_per_s"],
                         "best_median_rows_per_s": oracle_pick["best_median_rows_per_s"]}

    auto = final.get("autotune", {}).get("rows_per_s")
    oracle = final.get("grid", {}).get("rows_per_s")
    oracle_best_median = final.get("grid", {}).get("best_median_rows_per_s")
    rows = []
    for name, t in tuned.items():
        if name not in final:
            rows.append({"optimizer": name, "error": t.get("error")})
            continue
        f = final[name]
        rows.append({
            "optimizer": name,
            "config": t["config"],
            "rows_per_s": f["rows_per_s"],
            "spread": f["spread"],
            "peak_rss_mb": f["peak_rss_mb"],
            "pipeline_rss_mb": f["pipeline_rss_mb"],
            "vs_autotune": ratio(f["rows_per_s"], auto),
            "vs_oracle": ratio(f["rows_per_s"], oracle),
            "vs_oracle_best_median": ratio(f["rows_per_s"], oracle_best_median),  # biased down (pick_oracle)
            "tuning_s": t["tuning_s"],
            "trials": t["search"]["trials"],
            "stopped_by": t["search"]["stopped_by"],
            "label": "measured",
        })
    result: dict[str, Any] = {"format": fmt, "data": str(data), "rows": args.rows, "results": rows,
                              "grid_size": spec.space.grid_size(), "oracle": oracle_pick}
    if "grid" in tuned and "search" in tuned["grid"]:
        history = tuned["grid"]["search"]["history"]
        try:
            result["simulator_error"] = {"model": "as calibrated", **simulator_error(spec, node, calibration(), history)}
        except Exception as exc:  # the simulator is another helper's module; report, don't hide
            result["simulator_error"] = {"error": f"{type(exc).__name__}: {exc}"}
        if "c" in reanchored:
            result["simulator_error_reanchored"] = {"model": "re-anchored before the grid",
                                                   **simulator_error(spec, node, reanchored["c"], history)}
            result["drift"] = drift_report(calibration(), reanchored["c"], tuned["grid"]["search"].get("controls", []),
                                           result["simulator_error_reanchored"])
            if result["simulator_error"].get("pairs"):
                result["drift"]["error_level_from_controls"] = control_tracked_error(
                    result["drift"]["calibration_anchor_rows_per_s"] or 0.0, result["simulator_error"]["pairs"],
                    result["drift"]["controls"])
        if tuned["grid"]["search"].get("passes", 1) > 1:
            models = {se["model"]: model for se, model in ((result["simulator_error"], calibration()),
                                                           (result.get("simulator_error_reanchored"), reanchored.get("c")))
                      if se and "error" not in se}
            result["grid_passes"] = grid_passes_report(spec, node, history, models)
        if hasattr(calibration(), "to_json"):  # what the simulator was fitted from (anchor, knob effects)
            result["calibration"] = calibration().to_json()
    result["search_history"] = {n: t.get("search", {}).get("history") for n, t in tuned.items()}
    return result


def _grid_with_controls(spec: Any, node: Any, args: argparse.Namespace, calibration: Any,
                        reanchored: dict[str, Any], budget: float) -> dict[str, Any]:
    """The grid in one worker: first the calibration re-anchored right before it (its base
    configuration measured ``--reanchor-samples`` times; stored in ``reanchored["c"]``), then the
    grid ``--grid-passes`` times, each pass in the reverse order of the one before and with a
    control measurement of that base configuration every ``--control-every`` points (0: no
    controls and no re-anchor). Several passes are combined by :func:`combine_grid_passes`."""
    from contextlib import nullcontext

    from ingestion.calibrate import reanchor
    from ingestion.measure import MeasureWorker
    from optimizers.tuning import IngestJob, TuningOptions, tune_pipeline
    from optimizers.baselines.grid import GridSearch

    passes = args.grid_passes
    with MeasureWorker(spec, memory_limit_mb=node.ram_budget_mb) if spec.portable else nullcontext() as w:
        control = None
        if w is not None and args.control_every > 0 and hasattr(calibration, "profile_config"):
            reanchored["c"] = reanchor(calibration, node, evaluate=lambda c, **kw: w.measure(c, **kw),
                                       samples=args.reanchor_samples, note="right before the grid")
            r = reanchored["c"].reanchors[-1]
            progress(f"  re-anchor: base configuration {[round(x) for x in r['samples']]} rows/s, level "
                     f"{r['level_before']:,.0f} -> {r['level_after'] or 0:,.0f} (x{r['level_factor'] or 0:.2f})")
            control = calibration.profile_config
        runs = []
        for k in range(passes):
            if passes > 1:
                progress(f"  grid pass {k + 1}/{passes} ({'reversed' if k % 2 else 'forward'} order)")
            job = IngestJob.create(spec, node, time_budget_s=budget, seed=args.seed, final=None)
            options = TuningOptions(worker=w, progress=args.verbose, control=control, control_every=args.control_every)
            runs.append(tune_pipeline(job, GridSearch(spec.space, reverse=k % 2 == 1), options).to_json())
    return runs[0] if passes == 1 else combine_grid_passes(runs)


def combine_grid_passes(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One grid result from several passes' ``tune_pipeline`` results: the history combined by
    :func:`combine_passes`, the pick the best combined figure, ``tuning_s`` the total of the
    passes (controls included; each pass's in ``tuning_s_passes``), ``trials`` every grid
    measurement of every pass, the controls of all passes in the order measured, each with its
    ``pass`` (``before_trial`` counts within its pass)."""
    first = runs[0]
    history = combine_passes([r["search"]["history"] for r in runs])
    best = grid_top(history, 1)
    search = {
        **first["search"],
        "passes": len(runs),
        "trials": sum(r["search"]["trials"] for r in runs),
        "trials_passes": [r["search"]["trials"] for r in runs],
        "stopped_by": "; ".join(dict.fromkeys(r["search"]["stopped_by"] for r in runs)),
        "best_trial_rows_per_s": best[0]["rows_per_s"] if best else 0.0,
        "tuning_s_passes": [r["tuning_s"] for r in runs],
        "history": history,
    }
    if "controls" in first["search"]:
        search["controls"] = [{**c, "pass": k} for k, r in enumerate(runs, 1) for c in r["search"]["controls"]]
        search["controls_s"] = round(sum(r["search"]["controls_s"] for r in runs), 2)
    return {**first, "config": best[0]["config"] if best else first["config"],
            "rows_per_s": best[0]["rows_per_s"] if best else first["rows_per_s"],
            "tuning_s": sum(r["tuning_s"] for r in runs), "search": search}


def check_bars(formats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bars = []
    for f in formats:
        by = {r["optimizer"]: r for r in f["results"] if "rows_per_s" in r}
        it = by.get("intune")
        if it:
            bars.append({"format": f["format"], "bar": "intune >= 1.5x autotune", "value": it["vs_autotune"],
                         "met": bool(it["vs_autotune"] and it["vs_autotune"] >= 1.5)})
            bars.append({"format": f["format"], "bar": "intune >= 0.95x grid oracle (held-out rounds)",
                         "value": it["vs_oracle"], "met": bool(it["vs_oracle"] and it["vs_oracle"] >= 0.95),
                         "vs_oracle_best_median": it.get("vs_oracle_best_median")})
            bars.append({"format": f["format"], "bar": "intune found within 180 s", "value": it["tuning_s"],
                         "met": it["tuning_s"] <= 180})
        for key, which in (("simulator_error", "as calibrated"), ("simulator_error_reanchored", "re-anchored before the grid")):
            se = f.get(key, {})
            if se.get("mean_rel_error") is not None:
                bars.append({"format": f["format"], "bar": f"simulator mean error over grid < 15% ({which})",
                             "value": se["mean_rel_error"], "met": se["mean_rel_error"] < 0.15})
    return bars


def _grid_passes(text: str) -> int:
    """``--grid-passes``: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 (1: the grid measured once), got {text!r}")
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--formats", default="tsv,tfrecord")
    p.add_argument("--optimizers", default=",".join(all_optimizers()),
                   help="comma-separated registered ingestion optimizers (default: all, grid last)")
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-budget-s", type=float, default=180.0)
    p.add_argument("--grid-budget-s", type=float, default=1200.0)
    p.add_argument("--rounds", type=int, default=3,
                   help="side-by-side rounds (default 3; the oracle's held-out figure needs 2 or more)")
    p.add_argument("--oracle-top", type=int, default=5,
                   help="grid configurations re-measured side by side to pick the oracle (default 5)")
    p.add_argument("--control-every", type=int, default=10,
                   help="a control measurement of the calibration's base configuration every N grid points (0: none)")
    p.add_argument("--reanchor-samples", type=int, default=5,
                   help="base measurements of the re-anchor right before the grid (default 5)")
    p.add_argument("--grid-passes", type=_grid_passes, default=1,
                   help="measure the grid N times, alternating forward and reversed order, and take each "
                        "configuration's mean (default 1: once)")
    p.add_argument("--data-root", default=".trainwise/bench-data")
    p.add_argument("--skip-sim", action="store_true", help="skip the simulated part (other node sizes)")
    p.add_argument("--verbose", action="store_true", help="print every trial")
    p.add_argument("--json-out", type=Path, default=None)
    p.add_argument("--rescore", type=Path, default=None,
                   help="print the simulator errors and drift of a saved result JSON and exit (no measurement)")
    args = p.parse_args(argv)
    if args.rescore is not None:
        rescore(args.rescore)
        return 0
    args.optimizers = [o for o in args.optimizers.split(",") if o]
    unknown = sorted(set(args.optimizers) - set(all_optimizers()))
    if unknown:
        p.error(f"unknown optimizer(s) {unknown}; allowed: {', '.join(all_optimizers())}")

    from ingestion.node import this_machine

    node = this_machine()
    out: dict[str, Any] = {"benchmark": "ingestion", "node": node.__dict__, "load_before": machine_state(),
                           "time_budget_s": args.time_budget_s, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    formats: list[dict[str, Any]] = []
    out["real"] = formats
    for fmt in [f for f in args.formats.split(",") if f]:
        formats.append(run_format(fmt, args, node))
        # after each format, so a long run that is cut short keeps its data
        write_result(args.json_out, {**out, "bars": check_bars(formats), "partial": True})
        f = formats[-1]
        print_table(
            ["optimizer", "rows/s (measured)", "spread", "peak RSS MB", "x AUTOTUNE", "x oracle", "tuning s", "trials"],
            [[r["optimizer"], r.get("rows_per_s"), r.get("spread"), r.get("peak_rss_mb"), r.get("vs_autotune"),
              r.get("vs_oracle"), r.get("tuning_s"), r.get("trials")] for r in f["results"]],
            title=f"\nReal DLRM pipeline, {fmt}, {args.rows:,} rows, {node.vcpus} vCPUs (measured, side by side)",
            digits=2,
        )
        for key in ("simulator_error", "simulator_error_reanchored"):
            se = f.get(key, {})
            if se.get("mean_rel_error") is not None:
                print(f"simulator error ({se.get('model')}) over {se['configs']} grid configurations (simulated vs "
                      f"measured): mean {se['mean_rel_error']:.1%}, median {se['median_rel_error']:.1%}, max "
                      f"{se['max_rel_error']:.1%}; model low on {se['model_low_on']} of {se['configs']}")
                if se.get("by_other_load"):
                    print("  " + other_load_line(se["by_other_load"]))
            elif se:
                print(f"simulator error: not computed ({se.get('error')})")
        if f.get("grid_passes"):
            print(passes_line(f["grid_passes"]))
        d = f.get("drift")
        if d:
            print(f"drift (measured, base configuration): calibration anchor {d['calibration_anchor_rows_per_s'] or 0:,.0f}, "
                  f"re-anchor before the grid x{d['reanchor_level_factor'] or 0:.2f}; controls during the grid "
                  f"{[round(c['rows_per_s']) for c in d['controls']]} (max/min {d['controls_max_over_min'] or 0:.2f})")
    if not args.skip_sim:
        try:
            from benchmarks.ingestion_sim import run_simulated

            out["simulated"] = run_simulated(args)
        except ImportError as exc:
            out["simulated"] = {"error": f"simulated part not available: {exc}"}
            progress(out["simulated"]["error"])
    out["bars"] = check_bars(formats)
    out["load_after"] = machine_state()
    print_table(["format", "bar", "value", "met", "x oracle's best median (biased down)"],
                [[b["format"], b["bar"], b["value"], b["met"], b.get("vs_oracle_best_median")] for b in out["bars"]],
                title="\nBars", digits=3)
    write_result(args.json_out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
