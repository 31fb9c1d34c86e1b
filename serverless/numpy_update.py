"""The PPO minibatch step in numpy: a hand-written forward, backward and Adam step.

It computes the networks it declares (:func:`supports`): the learner's stacked actor-critic
(:class:`serverless.torch_policy.ActorCritic`) of any widths, with an activation whose
derivative is a function of its output (tanh, ReLU, ELU: the backward pass reads the layers'
outputs only). Any other network runs on torch (:func:`serverless.ppo.choose_engine`, with a
note); a model it cannot compute is refused here, with the reason, rather than mis-differentiated.

For the learner's small actor-critic (two tanh MLPs of 64x64) on minibatches of 64, one PPO
step is about two million floating-point operations, tens of microseconds of one core's
arithmetic; what costs is the framework around it. torch spends about 0.5-1 ms per minibatch
on per-kernel dispatch and autograd's bookkeeping (the benchmark's update floor, a minimal
fused torch loop, is that). The same maths as about sixty numpy calls on float32 arrays takes
a quarter of it, provided numpy's BLAS keeps to one thread (:meth:`NumpyPPOStep.blas_threads`).

It trains the learner's torch model in place. The parameters, their gradients and Adam's
two moments live in flat float32 buffers and every parameter is a view of its slice, so

* the update is one expression per layer on stacked ``[2, in, out]`` weights (actor and
  critic side by side, as :class:`serverless.torch_policy.ActorCritic` stores them), and
  gradient clipping and Adam are a handful of calls over one flat array;
* the model's and the optimiser's ``state_dict`` (checkpoints), the weight export and the
  layout probe's autograd see ordinary torch tensors, unchanged.

The maths is torch's, term by term: the clipped surrogate with ``torch.max``'s gradient
(ties, which occur whenever the ratio is inside the clip range, pass the whole gradient
through the unclipped ratio), the unbiased standard deviation in the advantage
normalisation, ``clip_grad_norm_``'s ``max_norm / (norm + 1e-6)``, and the fused Adam's
update with its bias corrections. It agrees with the torch path to float32 rounding (the
tests compare gradients and whole updates), not bit for bit: summation orders differ, so a
seed's trajectory is its own under each engine (``PPOConfig.update_engine``); each engine
is deterministic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from serverless.network import ACTIVATIONS, NetworkSpec, forward

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
#: the activations whose derivative the backward pass can take from their output
SUPPORTED_ACTIVATIONS = tuple(name for name, a in ACTIVATIONS.items() if a.grad_from_output is not None)


def supports(network: NetworkSpec) -> str | None:
    """``None`` when this engine computes ``network``'s PPO update; else why not (one line).

    Every :class:`NetworkSpec` has the layer structure it computes (stacked actor and critic MLPs
    of one or more hidden layers); the activation is what can rule it out."""
    if network.activation not in SUPPORTED_ACTIVATIONS:
        return (f"the numpy engine's backward takes the activation's derivative from its output: "
                f"{', '.join(SUPPORTED_ACTIVATIONS)}, not {network.activation}")
    return None


def _check_model(model: Any) -> None:
    """``model`` is the stacked actor-critic of its spec's network, and a network this engine computes."""
    from serverless.torch_policy import ActorCritic

    if not isinstance(model, ActorCritic):
        raise ValueError(f"the numpy engine computes serverless.torch_policy.ActorCritic, not {type(model).__name__}")
    spec = model.spec
    reason = supports(spec.network)
    if reason is not None:
        raise ValueError(reason)
    sizes = [spec.obs_dim, *spec.network.hidden, spec.act_dim]
    expected = [(2, n_in, n_out) for n_in, n_out in zip(sizes[:-1], sizes[1:])]
    if [tuple(w.shape) for w in model.weights] != expected:
        raise ValueError(f"the model's layers {[tuple(w.shape) for w in model.weights]} are not its spec's {expected}")


class NumpyPPOStep:
    """One PPO minibatch step (loss, gradient, clipping, Adam) on a torch ``ActorCritic``.

    ``config`` is the learner's :class:`serverless.ppo.PPOConfig`; ``optimizer`` its torch
    Adam, whose hyperparameters (betas, eps) it follows and whose state it keeps as views.
    Raises ``ValueError`` naming why for a model it does not compute (:func:`supports`).
    """

    def __init__(self, model: Any, optimizer: Any, config: Any) -> None:
        import torch
        from threadpoolctl import ThreadpoolController

        _check_model(model)
        network = model.spec.network
        self._act = network.act.numpy
        self._act_grad = network.act.grad_from_output
        self.model = model
        self._blas = ThreadpoolController()
        self.optimizer = optimizer
        self.config = config
        self.discrete = model.spec.action_kind == "discrete"
        self.params = list(model.parameters())
        offsets = np.cumsum([0, *(p.numel() for p in self.params)]).tolist()
        #: each parameter with its slice of the flat buffers
        self._spans = list(zip(self.params, offsets[:-1], offsets[1:]))
        total = offsets[-1]
        # the flat buffers, and every parameter / moment a view of its slice
        self._flat = torch.empty(total)
        self._exp_avg = torch.zeros(total)
        self._exp_avg_sq = torch.zeros(total)
        with torch.no_grad():
            for p, a, b in self._spans:
                self._flat[a:b].copy_(p.detach().reshape(-1))
                p.data = self._flat[a:b].view_as(p)
        self.flat = self._flat.numpy()
        self.m = self._exp_avg.numpy()
        self.v = self._exp_avg_sq.numpy()
        self.grad = np.zeros(total, dtype=np.float32)
        self._tmp = np.zeros(total, dtype=np.float32)
        self.steps = 0
        self._expose_optimizer_state()

        def views(buffer: np.ndarray) -> list[np.ndarray]:
            return [buffer[a:b].reshape(tuple(p.shape)) for p, a, b in self._spans]

        layers = len(model.weights)
        by_param = dict(zip((id(p) for p in self.params), range(len(self.params))))
        w_idx = [by_param[id(w)] for w in model.weights]
        b_idx = [by_param[id(b)] for b in model.biases]
        pv, gv = views(self.flat), views(self.grad)
        self.W = [pv[i] for i in w_idx]
        self.b = [pv[i] for i in b_idx]
        self.gW = [gv[i] for i in w_idx]
        self.gb = [gv[i] for i in b_idx]
        self.layers = layers
        self._layers = list(zip(self.W, self.b))
        if not self.discrete:
            k = by_param[id(model.log_std)]
            self.log_std, self.g_log_std = pv[k], gv[k]
        self._constants: dict[tuple[str, int], np.ndarray] = {}

    # ------------------------------------------------------------ optimiser state
    def _expose_optimizer_state(self) -> None:
        """Point the torch optimiser's per-parameter state at the flat moments (for its state_dict)."""
        import torch

        for p, a, b in self._spans:
            self.optimizer.state[p] = {
                "step": torch.tensor(float(self.steps)),
                "exp_avg": self._exp_avg[a:b].view_as(p),
                "exp_avg_sq": self._exp_avg_sq[a:b].view_as(p),
            }

    def sync_optimizer_state(self) -> None:
        """Write the step count into the optimiser's state before it is saved."""
        for p in self.params:
            self.optimizer.state[p]["step"].fill_(float(self.steps))

    def adopt_optimizer_state(self) -> None:
        """After ``optimizer.load_state_dict``: take its moments and step into the flat buffers."""
        self.steps = 0
        for p, a, b in self._spans:
            state = self.optimizer.state.get(p) or {}
            if "exp_avg" in state:
                self.m[a:b] = state["exp_avg"].detach().reshape(-1).numpy()
                self.v[a:b] = state["exp_avg_sq"].detach().reshape(-1).numpy()
                self.steps = int(float(state["step"]))
            else:
                self.m[a:b] = 0.0
                self.v[a:b] = 0.0
        self._expose_optimizer_state()

    def blas_threads(self, threads: int) -> Any:
        """A context that holds numpy's BLAS to ``threads`` threads: OpenBLAS otherwise spreads
        a 128x64 matmul over every core, several times slower than one thread here."""
        return self._blas.limit(limits=threads, user_api="blas")

    # ------------------------------------------------------------ the step
    def step(self, mb: dict[str, np.ndarray], form: Any, lr: float) -> tuple[float, ...]:
        """Loss and gradient on one minibatch, gradient-norm clipping, one Adam step.

        Returns the minibatch's statistics in the order of :data:`serverless.ppo.STAT_NAMES`
        (the entropy NaN when the bonus is off)."""
        stats = self.gradient(mb, form)
        self._clip_grad_norm(self.config.max_grad_norm)
        self._adam(lr)
        return stats

    def gradient(self, mb: dict[str, np.ndarray], form: Any) -> tuple[float, ...]:
        """The gradient of the loss ``form`` (a :class:`serverless.ppo.LossForm`: the update's,
        or the layout probe's at ratio 1) on ``mb`` into ``self.grad``; returns the statistics."""
        hidden = [mb["obs"]]
        out = forward(mb["obs"], self._layers, self._act, keep=hidden)
        d_out = np.zeros_like(out)
        stats = self._loss_grads(mb, out, d_out, form)
        self._backward(hidden, d_out)
        return stats

    def _loss_grads(self, mb: dict[str, np.ndarray], out: np.ndarray, d_out: np.ndarray, form: Any) -> tuple[float, ...]:
        """The loss's gradient with respect to the output layer into ``d_out`` (and, for a
        Gaussian policy, to ``log_std``); returns the minibatch's statistics.

        The hand-written derivative of :func:`serverless.ppo.ppo_loss`, term by term."""
        clip, ent_coef = form.clip, form.ent_coef
        n = len(out[0])
        head, value = out[0], out[1, :, 0]
        mean_w = self._mean_weights(n)  # means as one BLAS dot each: a fraction of np.mean's overhead
        adv = mb["advantages"]
        if form.norm_adv and n > 1:
            centred = adv - np.dot(adv, mean_w)
            adv = centred / np.float32(math.sqrt(float(np.dot(centred, centred)) / (n - 1)) + 1e-8)  # unbiased std
        if self.discrete:
            shifted = head - head.max(axis=1, keepdims=True)
            logp_all = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            rows, actions = self._arange(n), mb["actions"]
            logp = logp_all[rows, actions]
        else:
            inv_std = np.exp(-self.log_std)
            zed = (mb["actions"] - head) * inv_std
            logp = (-0.5 * zed * zed).sum(axis=1) - (self.log_std.sum() + _HALF_LOG_2PI * head.shape[1])
        log_ratio = logp - mb["logprobs"]
        ratio = np.exp(log_ratio)
        surr = -adv * ratio
        surr_clipped = -adv * np.clip(ratio, 1 - clip, 1 + clip)
        pg_loss = np.dot(np.maximum(surr, surr_clipped), mean_w)
        # torch.max's gradient: to the larger term; on a tie (the ratio inside the clip range)
        # half to each, and the clamp passes its half, so the unclipped term gets it all
        g_logp = np.multiply(surr, surr >= surr_clipped)
        g_logp *= np.float32(1 / n)
        v_loss = self._value_grad(mb, value, d_out, form, mean_w)

        entropy = math.nan
        d_head = d_out[0]
        if self.discrete:
            # d logp / d logits = onehot - probs
            probs = np.exp(logp_all)
            np.multiply(probs, -g_logp[:, None], out=d_head)
            d_head[rows, actions] += g_logp
            if ent_coef:
                ent = -(probs * logp_all).sum(axis=1)
                entropy = float(np.dot(ent, mean_w))
                # loss -= ent_coef * mean(H);  dH/dlogits = -p (log p + H)
                d_head += probs * (logp_all + ent[:, None]) * np.float32(ent_coef / n)
        else:
            d_head[:] = g_logp[:, None] * zed * inv_std
            self.g_log_std[:] = (g_logp[:, None] * (zed * zed - 1)).sum(axis=0)
            if ent_coef:
                entropy = float((0.5 + _HALF_LOG_2PI + self.log_std).sum())
                self.g_log_std -= np.float32(ent_coef)
        approx_kl = float(np.dot((ratio - 1) - log_ratio, mean_w))
        clipfrac = np.count_nonzero(np.abs(ratio - 1) > clip) / n
        return float(pg_loss), float(v_loss), entropy, approx_kl, clipfrac

    def _value_grad(self, mb: dict[str, np.ndarray], value: np.ndarray, d_out: np.ndarray, form: Any,
                    mean_w: np.ndarray) -> float:
        """The value term's gradient into the critic's column of ``d_out``; returns the value loss."""
        n, clip = len(value), form.clip
        v_err = value - mb["returns"]
        if form.clip_vloss:
            v_clipped = mb["values"] + np.clip(value - mb["values"], -clip, clip)
            c_err = v_clipped - mb["returns"]
            use_plain = v_err * v_err >= c_err * c_err
            v_loss = 0.5 * np.dot(np.maximum(v_err * v_err, c_err * c_err), mean_w)
            inside = np.abs(value - mb["values"]) <= clip
            g_value = np.where(use_plain, v_err, c_err * inside)
        else:
            v_loss = 0.5 * np.dot(v_err, v_err) / n
            g_value = v_err
        d_out[1, :, 0] = g_value * np.float32(form.vf_coef / n)
        return float(v_loss)

    def _backward(self, hidden: list[np.ndarray], d_out: np.ndarray) -> None:
        """Back through the layers from ``d_out``: the weights' and biases' gradients into ``self.grad``."""
        gW, gb, W, act_grad = self.gW, self.gb, self.W, self._act_grad
        last = self.layers - 1
        ones = self._ones(d_out.shape[1])  # bias gradients: sums over the minibatch as a matmul
        np.matmul(hidden[last].transpose(0, 2, 1), d_out, out=gW[last])
        np.matmul(ones, d_out, out=gb[last])
        d_h = np.matmul(d_out, W[last].transpose(0, 2, 1))
        for i in range(last - 1, -1, -1):
            d_z = d_h * act_grad(hidden[i + 1])
            below = hidden[i]
            np.matmul(below.T if i == 0 else below.transpose(0, 2, 1), d_z, out=gW[i])
            np.matmul(ones, d_z, out=gb[i])
            if i:
                d_h = np.matmul(d_z, W[i].transpose(0, 2, 1))

    def _arange(self, n: int) -> np.ndarray:
        return self._cached(("arange", n), lambda: np.arange(n))

    def _mean_weights(self, n: int) -> np.ndarray:
        return self._cached(("mean", n), lambda: np.full(n, 1 / n, dtype=np.float32))

    def _ones(self, n: int) -> np.ndarray:
        return self._cached(("ones", n), lambda: np.ones((1, n), dtype=np.float32))

    def _cached(self, key: tuple[str, int], make: Any) -> np.ndarray:
        """Constant arrays per minibatch size (a batch has at most two sizes)."""
        array = self._constants.get(key)
        if array is None:
            array = self._constants[key] = make()
        return array

    def _clip_grad_norm(self, max_norm: float) -> None:
        """``torch.nn.utils.clip_grad_norm_``: scale by ``max_norm / (norm + 1e-6)`` when under 1."""
        norm = math.sqrt(float(np.dot(self.grad, self.grad)))
        coef = max_norm / (norm + 1e-6)
        if coef < 1.0:
            self.grad *= np.float32(coef)

    def _adam(self, lr: float) -> None:
        """torch's (fused) Adam step over the flat buffers, no weight decay."""
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        self.steps += 1
        bias1 = 1 - beta1**self.steps
        bias2_sqrt = math.sqrt(1 - beta2**self.steps)
        g, m, v, tmp = self.grad, self.m, self.v, self._tmp
        # m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2
        np.subtract(g, m, out=tmp)
        tmp *= np.float32(1 - beta1)
        m += tmp
        v *= np.float32(beta2)
        np.multiply(g, g, out=tmp)
        tmp *= np.float32(1 - beta2)
        v += tmp
        # p -= lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps)
        np.sqrt(v, out=tmp)
        tmp *= np.float32(1 / bias2_sqrt)
        tmp += np.float32(eps)
        np.divide(m, tmp, out=tmp)
        tmp *= np.float32(lr / bias1)
        self.flat -= tmp

