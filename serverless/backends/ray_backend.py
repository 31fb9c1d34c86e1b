"""The Ray backend: rollout actors, each a function instance running the same ``handler``.

**Session.** ``RayBackend()`` joins the Ray session of this process when there is one
(``ray.is_initialized()``), else starts Ray locally (``ray.init()``);
``RayBackend(address=...)`` connects to an existing cluster. ``close()`` kills the
backend's own actors and calls ``ray.shutdown()`` only when the backend called
``ray.init`` itself: a session the user started stays up, and disconnecting from a
joined cluster leaves the cluster running.

**Actors.** Ray actors (``num_cpus=1`` each), one per concurrent function:
``min(concurrency, events, the cluster's CPUs)`` of them run a batch through a
``ray.util.ActorPool``, and the actors are kept across ``invoke`` calls. Each actor is one
long-lived process, so the handler's warm state (its cached envs, mid-episode, keyed by env
id, kwargs and slot) survives between iterations, as in a warm Lambda container. The pool
hands the events out in order and takes the results back in order, and an actor is free for
the next event once its result is taken, so event ``i`` of a batch runs on actor ``i % actors``
in every batch, as on the local emulator, and an actor's envs stay on it (measured: no slot
replayed, see
``benchmarks/ray_actor_pool.py``). Which actor runs an event never changes what it returns: a slot event's env is
continued warm or rebuilt by replay (``serverless.handler``), so a batch on Ray steps
exactly the trajectories the handler steps in this process for the same events. A new
memory size resets the actors' warm state (on Lambda: new instances, cold starts), and
an actor that dies is replaced by a new one on the next call. The actors hold their
CPUs until ``close()``.

**Weights.** The policy's weights (an event's ``weights_npz_b64``) are put in Ray's
object store once (``ray.put``) and every event of the batch, and of its retry rounds,
takes them by reference; the actor puts them back into the event, so the handler's
event is the one the other backends send.

Figures: ``wall_s`` and ``lambda_s`` are both the measured wall time of the batch
(label "measured": nothing is modelled), and each billing record is the handler's
own measured duration rounded up to 1 ms, priced as if it had run on Lambda at the
requested memory size (the ledger says "modelled from price table"). Memory size
does not limit an actor's CPU; it only prices it.

Ray is an optional part of the install (the ``ray`` extra); without it this backend says which
extra to install, and the other backends work as before.

**Code on the cluster.** Every actor runs in a ``runtime_env`` (:func:`rollout_runtime_env`)
whose ``py_modules`` ship the code the handler runs: the project's ``serverless`` and ``core``
packages and, for a ``module:EnvId`` env, the user's module (its file or its top-level
package, :func:`serverless.envs.env_module_root`). Ray packs them on the driver, keeps them in
the cluster's object store by content hash and unpacks them onto each node's workers' path, so
a node that has none of the driver's directories (another machine of the cluster) imports the
same code; nothing of the driver's ``sys.path`` or ``PYTHONPATH`` travels. A batch whose env
module is not shipped yet starts new actors with it (cold starts). The nodes need the
third-party packages themselves (``pip install 'trainwise[rl,ray]'``, or the same image).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from core.errors import UserError
from core.json_edge import JsonObject
from serverless.invocation import BillingRecord, Invocation, InvokeBatch
from serverless.invocation import check_memory_mb
from serverless.pricing import billed_ms
from serverless.rollout_event import RolloutEvent, RolloutReply

_PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: the project's packages the handler imports (serverless imports only core below it)
_PROJECT_PACKAGES = ("serverless", "core")
_WEIGHTS = "weights_npz_b64"


def rollout_runtime_env(env_modules: tuple[str, ...] = ()) -> JsonObject:
    """The rollout actors' Ray ``runtime_env``: ``py_modules`` with the project's packages and
    ``env_modules`` (paths of the users' env modules: a ``.py`` file or a package directory)."""
    project = [str(_PROJECT_ROOT / name) for name in _PROJECT_PACKAGES]
    return {"py_modules": [*project, *env_modules], "excludes": ["__pycache__", "*.pyc"]}


def _uploaded(runtime_env: JsonObject) -> JsonObject:
    """``runtime_env`` with its local ``py_modules`` packed into the cluster's object store and
    replaced by their ``gcs://`` URIs.

    Ray takes local paths only in the job's own ``runtime_env`` (``ray.init``), not in an
    actor's; but the backend joins sessions it did not start and learns a batch's env module only
    when it sees the batch. So it packs them itself, with the function ``ray.init`` and Ray
    Client use for the job's ``py_modules`` (``ray._private.runtime_env.py_modules``: private,
    hence the pinned Ray in pyproject.toml; ``tests/serverless/backends/test_ray_cluster.py``
    fails if it changes). A package is uploaded once per content hash."""
    import tempfile

    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed

    with tempfile.TemporaryDirectory(prefix="trainwise-ray-pack-") as scratch:
        packed = upload_py_modules_if_needed(dict(runtime_env), include_gitignore=False, scratch_dir=scratch)
    packed.pop("excludes", None)  # used while packing only
    return packed


def env_modules_of(events: list[RolloutEvent]) -> tuple[str, ...]:
    """The users' env modules the events' ``module:EnvId`` ids need (not those installed in
    site-packages, which the nodes have), as paths, sorted."""
    from serverless.envs import env_module_root

    roots = {env_module_root(str(e.get("env_id", ""))) for e in events}
    return tuple(sorted(str(r) for r in roots if r is not None))


class _RayReplyRequired(TypedDict):
    """The key every actor's answer has."""

    ok: bool


class _RayReply(_RayReplyRequired, total=False):
    """An actor's answer: the handler's reply, or the error it raised."""

    result: RolloutReply
    error: str


class RolloutActor:
    """One function instance (a Ray actor): runs the handler, whose warm state lives on in
    this process between calls."""

    def run(self, event: RolloutEvent, weights_b64: str | None) -> _RayReply:
        """``handler(event)`` with the weights put back into the event; errors as a reply."""
        from serverless.handler import handler

        if weights_b64 is not None:
            event = {**event, _WEIGHTS: weights_b64}
        try:
            return {"ok": True, "result": handler(event, None)}
        except Exception as exc:  # reported per invocation
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def reset(self) -> None:
        """Forget the warm state: the next call of every actor id is a cold start."""
        from serverless.handler import reset_warm_state

        reset_warm_state()


def _invocation(reply: _RayReply, memory_mb: int) -> Invocation:
    """An actor's reply as an invocation billed from the handler's measured duration."""
    if not reply.get("ok"):
        return Invocation(None, BillingRecord(0, 0.0, 0.0, memory_mb, error=str(reply.get("error")), label="measured"))
    result = reply["result"]
    t = result["timings"]
    cold = bool(result.get("cold_start"))
    return Invocation(result, BillingRecord(
        billed_ms=billed_ms(t["total_ms"]),
        duration_ms=t["total_ms"],
        init_ms=t["init_ms"] if cold else 0.0,
        memory_mb=memory_mb,
        cold_start=cold,
        label="measured",
    ))


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("the ray backend needs Ray: pip install 'trainwise[ray]' (or use the local or lambda "
                            "backend)") from None

        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(log_to_driver=False, include_dashboard=False)
        self._ray = ray
        self._shipped: tuple[str, ...] = ()  # the env modules the actors' runtime_env carries
        self._actor_class = self._remote_class(self._shipped)
        self._actors: list[Any] = []
        self._dead: set[int] = set()
        self._memory_mb: int | None = None
        self._weights: tuple[str, Any] | None = None  # the last weights put, and their reference

    def _remote_class(self, env_modules: tuple[str, ...]) -> Any:
        runtime_env = _uploaded(rollout_runtime_env(env_modules))
        return self._ray.remote(num_cpus=1, max_restarts=0, runtime_env=runtime_env)(RolloutActor)

    def _ship(self, events: list[RolloutEvent]) -> None:
        """Make sure the actors carry every env module the events need: new actors if not."""
        needed = env_modules_of(events)
        if set(needed) <= set(self._shipped):
            return
        self._shipped = tuple(sorted({*self._shipped, *needed}))
        self._actor_class = self._remote_class(self._shipped)
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors, self._memory_mb = [], None
        self._dead.clear()

    @property
    def actors(self) -> tuple[Any, ...]:
        """The handles of the backend's live rollout actors."""
        return tuple(self._actors)

    def _ensure_actors(self, n: int, memory_mb: int) -> list[Any]:
        """The first ``n`` actors (made as needed, dead ones replaced), their warm state
        reset when the memory size changed."""
        for index in sorted(self._dead):
            self._ray.kill(self._actors[index])
            self._actors[index] = self._actor_class.remote()
        self._dead.clear()
        while len(self._actors) < n:
            self._actors.append(self._actor_class.remote())
        if self._memory_mb is not None and memory_mb != self._memory_mb:
            for actor in self._actors:  # runs before any later call on the same actor
                actor.reset.remote()
        self._memory_mb = memory_mb
        return self._actors[:n]

    def _weights_ref(self, weights: str) -> Any:
        """The object-store reference of ``weights``, put once while they stay the same."""
        if self._weights is None or (self._weights[0] is not weights and self._weights[0] != weights):
            self._weights = (weights, self._ray.put(weights))
        return self._weights[1]

    def _submit(self, actor: Any, event: RolloutEvent) -> Any:
        """Send ``event`` to ``actor``, its weights by reference."""
        weights = event.get(_WEIGHTS)
        if not isinstance(weights, str):
            return actor.run.remote(event, None)
        rest = {k: v for k, v in event.items() if k != _WEIGHTS}
        return actor.run.remote(rest, self._weights_ref(weights))

    def _run_pooled(self, actors: list[Any], events: list[RolloutEvent]) -> tuple[list[_RayReply], list[int]]:
        """Each event on the pool's next free actor; the replies in the events' order, and the
        index of the actor each event ran on.

        ``ray.util.ActorPool`` rather than a hand-made pool: measured side by side
        (``benchmarks/ray_actor_pool.py``: CartPole, 2 and 4 functions on 2 actors, 6 iterations,
        2 repeats, three runs) it replayed no slot, gave the same learning, and its rollout time
        was within the noise of the hand-made pool's (0.61x, 0.63x and 1.17x, at load average 14
        to 18 on 2 cores): no measured reason to keep a pool of our own.
        It calls ``submit`` in the events' order, so the order of the calls tells the actors."""
        from ray.util import ActorPool

        index = {id(actor): i for i, actor in enumerate(actors)}
        placed: list[int] = []

        def submit(actor: Any, event: RolloutEvent) -> Any:
            placed.append(index[id(actor)])
            return self._submit(actor, event)

        pool = ActorPool(actors[::-1])  # it hands out its free actors from the end: event i to actor i % n
        for event in events:
            pool.submit(submit, event)
        replies = [self._reply(pool, placed, i) for i in range(len(events))]
        return replies, placed

    def _reply(self, pool: Any, placed: list[int], i: int) -> _RayReply:
        """The next result of ``pool`` (event ``i``'s); a dead actor or an error as a reply."""
        try:
            return pool.get_next()
        except self._ray.exceptions.RayActorError as exc:  # the process died: replaced next call
            self._dead.add(placed[i])
            return {"ok": False, "error": f"rollout actor died: {str(exc).splitlines()[0]}"}
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def invoke(self, events: list[RolloutEvent], memory_mb: int, concurrency: int | None = None) -> InvokeBatch:
        check_memory_mb(memory_mb)
        if not events:  # as on the other backends: nothing to run, no invocations
            return InvokeBatch([], 0.0, 0.0, "measured", concurrency or 0)
        concurrency = len(events) if concurrency is None else int(concurrency)
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        cpus = int(self._ray.cluster_resources().get("CPU", 0))
        n_actors = max(1, min(concurrency, len(events), cpus))
        t0 = time.perf_counter()
        self._ship(events)
        replies, placed = self._run_pooled(self._ensure_actors(n_actors, memory_mb), events)
        for reply, a in zip(replies, placed):
            if reply.get("ok"):
                reply["result"]["lane"] = a  # the actor: its events run one after another
        wall_s = time.perf_counter() - t0
        notes = []
        if concurrency > cpus:
            notes.append(f"asked concurrency {concurrency} exceeds the Ray cluster's {cpus} CPUs; "
                         f"{n_actors} rollout actors run the batch, the other events queue")
        invocations = [_invocation(reply, memory_mb) for reply in replies]
        return InvokeBatch(invocations, wall_s, wall_s, "measured", concurrency, notes)

    def close(self) -> None:
        """Kill the backend's actors; shut Ray down only if this backend started it."""
        ray = self._ray
        if ray.is_initialized():
            for actor in self._actors:
                ray.kill(actor)
        self._actors, self._weights = [], None
        self._dead.clear()
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
        self._started_ray = False
