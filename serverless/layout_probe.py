"""Counterfactual rollout layouts, measured on one iteration's own segments (for a tuner).

A run at a layout of ``N`` envs of ``T`` steps asks what ``m·N`` envs of ``T/m`` steps, at
the same batch, would have given PPO. Both questions are answered on the batch just
collected, at the learner's pre-update parameters, without another rollout:

* **gradient noise**: each env's segment is cut into ``m`` chunks (boundaries at
  ``round(k·T/m)``) and the PPO-loss gradient is taken on every chunk. Chunks of
  different envs are independent, so across every pair of envs ``(e, f)``
  ``|g_e − g_f|²/2`` estimates the variance of one env's mean gradient at this layout
  (``var_env``), and the mean of ``|g_e,i − g_f,j|²/2`` over their chunks that of one chunk
  (``var_chunk``): ``m·N`` independent chunks of ``T/m`` steps would have a mean-gradient
  variance of ``var_chunk / (m·N)`` against ``var_env / N`` at this layout. ``<g_e, g_f>``
  estimates the squared norm of the true gradient (``signal``), without the noise bias a
  squared norm of one mean would have.
* **truncation bias**: GAE is recomputed with a cut every ``T/m`` steps, each chunk
  bootstrapped from the value of the observation after it (as a segment of that length
  is), and the gradient of the loss difference is taken per env: ``<δ_e, δ_f>`` estimates
  ``|E δ|²``, the squared bias the shorter segments add to the gradient (``bias``).

The loss is PPO's at ratio 1 (the pre-update parameters): the policy term with
advantages normalised over the batch, plus ``vf_coef`` times the value term; the
entropy bonus is left out (it does not depend on the advantages). It is the learner's own
loss in that form (:meth:`serverless.ppo.LossForm.at_ratio_one`), differentiated by the
learner's engine (:meth:`serverless.ppo.PPOLearner.loss_gradient`): the probe has no loss or
forward pass of its own. Finer chunk counts
are computed once: a coarse chunk's gradient is the sample-weighted mean of its fine
chunks', so the cost is one backward pass per fine chunk plus one per env and chunk
count for the bias.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from serverless.ppo import LossForm, PPOLearner, compute_gae, learner_arrays
from serverless.rollout_batch import Segment


@dataclass(frozen=True)
class _EnvGrads:
    """One env's fine-chunk gradient sums and sample counts, and its bias vector per chunk count."""

    sums: Any  # torch tensor (M, P): per fine chunk, the sum over its samples of the per-sample gradient
    counts: np.ndarray  # (M,) samples per fine chunk
    deltas: dict[int, Any]  # chunk count -> (P,) mean gradient of the cut-GAE loss less the full one


def boundaries(n: int, chunks: int) -> list[int]:
    """Cut points of ``n`` steps into ``chunks`` near-equal chunks: ``round(k·n/chunks)``."""
    return [int(round(k * n / chunks)) for k in range(chunks + 1)]


def cut_gae(tr: dict[str, np.ndarray], last_value: float, chunks: int, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE of one segment as if it had been ``chunks`` segments: each chunk bootstraps the
    value of the observation after it (the next step's value; the segment's own last value
    at its end). A termination or truncation inside a chunk is handled as in any segment."""
    n = len(tr["rewards"])
    cuts = boundaries(n, chunks)
    advs, rets = [], []
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        last = float(tr["values"][b]) if b < n else last_value
        adv, ret = compute_gae(
            tr["rewards"][a:b], tr["values"][a:b], tr["terminated"][a:b], tr["truncated"][a:b], tr["trunc_values"][a:b],
            last, gamma, lam,
        )
        advs.append(adv)
        rets.append(ret)
    return np.concatenate(advs), np.concatenate(rets)


def _normalised(adv: np.ndarray) -> np.ndarray:
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def _mean_grad(learner: PPOLearner, tr: dict[str, np.ndarray], adv_n: np.ndarray, ret: np.ndarray) -> Any:
    """The gradient, at the learner's parameters and on its engine, of the PPO loss at ratio 1
    (:meth:`serverless.ppo.LossForm.at_ratio_one`) over ``tr``'s samples (a flat torch tensor)."""
    mb = learner_arrays({"obs": tr["obs"], "actions": tr["actions"], "logprobs": tr["logprobs"], "advantages": adv_n,
                         "returns": ret}, learner.spec.action_kind)
    return learner.loss_gradient(mb, LossForm.at_ratio_one(learner.config))


def _env_grads(
    learner: PPOLearner, tr: dict[str, np.ndarray], adv_n: np.ndarray, ret: np.ndarray,
    cut: dict[int, tuple[np.ndarray, np.ndarray]], fine: int,
) -> _EnvGrads:
    """One env's fine-chunk gradient sums (full GAE) and, per chunk count, its bias vector."""
    import torch

    n = len(adv_n)
    cuts = boundaries(n, fine)
    sums = []
    for a, b in zip(cuts, cuts[1:]):
        piece = {k: tr[k][a:b] for k in ("obs", "actions", "logprobs")}
        sums.append(_mean_grad(learner, piece, adv_n[a:b], ret[a:b]) * (b - a) if b > a else None)
    width = next(s for s in sums if s is not None).numel()
    stacked = torch.stack([s if s is not None else torch.zeros(width) for s in sums])
    full = _mean_grad(learner, tr, adv_n, ret)
    # the gradient of a difference of means over the same samples: the difference of their gradients
    deltas = {m: _mean_grad(learner, tr, adv_m, ret_m) - full for m, (adv_m, ret_m) in cut.items()}
    return _EnvGrads(stacked, np.diff(cuts).astype(float), deltas)


def _chunk_means(env: _EnvGrads, fine: int, chunks: int) -> Any:
    """The mean gradient of each of ``chunks`` chunks, from the fine chunks they are made of."""
    import torch

    per = fine // chunks
    sums = env.sums.reshape(chunks, per, -1).sum(1)
    counts = torch.as_tensor(env.counts.reshape(chunks, per).sum(1), dtype=sums.dtype).clamp(min=1.0)
    return sums / counts[:, None]


def _pair_stats(a: Any, b: Any, da: Any, db: Any) -> dict[str, float]:
    """One pair of independent envs' chunk means (``a``, ``b``: (m, P)) and bias vectors."""
    ga, gb = a.mean(0), b.mean(0)
    cross = float(ga @ gb)
    return {
        "var_env": float((ga - gb).pow(2).sum()) / 2,
        "var_chunk": (float(a.pow(2).sum(1).mean()) + float(b.pow(2).sum(1).mean()) - 2 * cross) / 2,
        "signal": cross,
        "bias": float(da @ db),
    }


class LayoutRow(TypedDict):
    """One chunk count's statistics, one entry per pair of envs (:func:`_pair_stats`)."""

    chunks: int
    pairs: list[dict[str, float]]


class LayoutProbe(TypedDict):
    """The counterfactual layouts measured on one batch (:func:`probe_layouts`)."""

    segment_steps: list[int]
    envs: int
    layouts: list[LayoutRow]
    cpu_s: float


def probe_layouts(
    learner: PPOLearner, segments: list[Segment], data: dict[str, np.ndarray], chunk_counts: tuple[int, ...],
) -> LayoutProbe:
    """The layouts of ``chunk_counts`` (powers of two) measured on this batch's ``segments``
    (``data``: the assembled batch, whose advantages and returns are the full GAE's).

    Returns, per chunk count, one row of statistics per pair of envs (see the module's
    docstring); JSON-ready. Segments shorter than ``max(chunk_counts)`` steps are left out."""
    c0 = time.thread_time()
    with learner.learner_threads():
        rows, lengths, count = _probe(learner, segments, data, chunk_counts)
    # the probe's own CPU time, so that a tuner can compare iterations with and without it
    return {"segment_steps": lengths, "envs": count, "layouts": rows, "cpu_s": time.thread_time() - c0}


def _probe(learner: PPOLearner, segments: list[Segment], data: dict[str, np.ndarray],
           chunk_counts: tuple[int, ...]) -> tuple[list[LayoutRow], list[int], int]:
    cfg = learner.config
    fine = max(chunk_counts)
    lengths = [len(tr["rewards"]) for _, tr, _ in segments]
    adv_n = _normalised(data["advantages"])
    cut_all = {m: [cut_gae(tr, last, m, cfg.gamma, cfg.gae_lambda) for _, tr, last in segments] for m in chunk_counts}
    cut_norm = {m: _normalised(np.concatenate([a for a, _ in rows])) for m, rows in cut_all.items()}
    envs, start = [], 0
    for k, ((_, tr, _), n) in enumerate(zip(segments, lengths)):
        end = start + n
        if n >= fine:
            cut = {m: (cut_norm[m][start:end], cut_all[m][k][1]) for m in chunk_counts}
            envs.append(_env_grads(learner, tr, adv_n[start:end], data["returns"][start:end], cut, fine))
        start = end
    rows = []
    for m in sorted(chunk_counts):
        means = [_chunk_means(e, fine, m) for e in envs]
        pairs = [
            _pair_stats(means[i], means[j], envs[i].deltas[m], envs[j].deltas[m])
            for i in range(len(envs)) for j in range(i + 1, len(envs))
        ]
        rows.append({"chunks": m, "pairs": pairs})
    return rows, lengths, len(envs)

