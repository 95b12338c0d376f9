"""A per-node Ray service for Ray-native trainers (verl, OpenRLHF, SkyRL run env code in Ray
processes): one ``SysmathNodeService`` actor per CPU node owns that node's envs, so each
episode's container runs under the node's own Docker daemon and warm pool, and a
``SysmathRayService`` router keeps every episode on its actor.

Placement: an actor on every alive node with CPUs and no GPU (``allow_gpu_nodes=True`` opts GPU
nodes in), narrowed to the nodes holding a custom ``resource`` or carrying ``labels`` when given,
pinned there with ``NodeAffinitySchedulingStrategy(soft=False)``. The actors are named per node
(namespace ``gym_sysmath``), so several routers (one per trainer worker) share them. Every such
node needs gym-sysmath installed and, for the Docker sandbox, its image built.

The router lives in the caller's process, not in an actor of its own: the record of each episode
(its reset and every action, observation and reward the caller saw) must outlive any node, and
a step then costs one hop to the node, not two. A node lost mid-episode (its actor died, the
node was removed) costs no episode: the router replays it on another node (same reset, the same
actions re-stepped) and compares every replayed observation and reward with what the caller
already saw. When they all match, the call goes on there, ``info["replayed_from_node"]`` says
so and ``service.replays`` records it; when they do not (the episode was not deterministic) or
no node is left, the step is the env's harness failure (reward 0, truncated, a
``scoring_error``), never a wrong answer and never a pass.

Ray is imported only inside functions and methods: the package works without it.

    service = SysmathRayService.start(address="auto")
    env = service.make_env("CsappExact-v0", max_turns=3)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(reply)  # on the node it was reset on
    env.close()
    print(service.health(), service.capacity(), service.replays)
    service.stop()

From asyncio code, ``env = await service.make_async_env(...)``, then ``await env.reset()`` and
``await env.step(...)``: the calls wait on the step pool, never on the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from gym_sysmath.async_env import AsyncSysmathEnv, make_async, run_blocking, step_threads
from gym_sysmath.evaluation.ray_runner import connect
from gym_sysmath.serving.protocol import remote_scoring_error

__all__ = ["NAMESPACE", "NoLiveNode", "NodeDraining", "RayEnv", "Replay", "SysmathNodeService", "SysmathRayService",
           "eligible_nodes"]

logger = logging.getLogger(__name__)

#: The Ray namespace of the node actors, so every router of a cluster finds the same ones.
NAMESPACE = "gym_sysmath"
#: Episodes one node actor runs at once (Ray's ``max_concurrency`` of the async actor).
DEFAULT_MAX_CONCURRENCY = 256
#: Finished episodes' envs a node keeps per (id, kwargs) to reuse, so a reset skips ``gym.make``.
IDLE_ENVS_PER_KIND = 64
#: How long ``health``/``capacity``/``drain`` wait for a node before calling it unreachable.
QUERY_TIMEOUT_S = 10.0

StepResult = tuple[Any, float, bool, bool, dict[str, Any]]


class NodeDraining(RuntimeError):
    """A draining node refuses new episodes (the router then opens them on another node)."""


class NoLiveNode(RuntimeError):
    """No node of the service is left to open an episode on."""


def _actor_name(node_id: str) -> str:
    return f"gym_sysmath_node:{node_id}"


def _kind(env_id: str, kwargs: Mapping[str, Any]) -> str:
    """The key under which a node reuses envs: the same id made with the same arguments."""
    return f"{env_id}|{sorted(kwargs.items())!r}"


def eligible_nodes(nodes: Sequence[Mapping[str, Any]], *, allow_gpu_nodes: bool = False, resource: str | None = None,
                   labels: Mapping[str, str] | None = None) -> list[str]:
    """The ids of the nodes (``ray.nodes()`` entries) a node actor goes to: alive, with CPUs, no
    GPU unless ``allow_gpu_nodes``, holding ``resource`` and carrying ``labels`` when given."""
    chosen = []
    for node in nodes:
        resources = node.get("Resources", {})
        node_labels = node.get("Labels", {}) or {}
        if not node.get("Alive") or resources.get("CPU", 0) <= 0:
            continue
        if resources.get("GPU", 0) > 0 and not allow_gpu_nodes:
            continue
        if resource is not None and resources.get(resource, 0) <= 0:
            continue
        if labels and any(node_labels.get(key) != value for key, value in labels.items()):
            continue
        chosen.append(node["NodeID"])
    return chosen


def _pool_stats() -> list[dict[str, Any]]:
    """This process's shared sandbox pools (one per backend and cap) and what each holds;
    ``reserve`` is the clean containers waiting for a lease."""
    from gym_sysmath.sandbox.pool import shared_pools

    pools = []
    for backend, size, sandbox in shared_pools():
        stats = dataclasses.asdict(sandbox.stats())
        pools.append({"backend": backend, "pool_size": size, **stats, "reserve": stats["clean_now"]})
    return pools


@dataclass
class _Live:
    """One episode on a node: its env and whether it ended (an ended one's env can be reused)."""

    kind: str
    env: AsyncSysmathEnv
    done: bool = False


class SysmathNodeService:
    """The body of one node's actor: the episodes it runs and the envs they run in.

    An async actor: each call awaits its step on the process-wide step pool
    (``gym_sysmath.async_env``), so up to ``max_concurrency`` episodes step at once and none
    waits behind another's tool turn. Envs are made here, so their containers belong to this
    node's Docker daemon and its warm pool.
    """

    def __init__(self, idle_per_kind: int = IDLE_ENVS_PER_KIND):
        import ray

        import gym_sysmath  # noqa: F401 - registers the ids in this actor's process

        self.node_id = ray.get_runtime_context().get_node_id()
        self.idle_per_kind = idle_per_kind
        self.episodes: dict[str, _Live] = {}
        self.idle: dict[str, list[AsyncSysmathEnv]] = {}
        self.draining = False
        self.started = time.time()
        self.counts = {"opened": 0, "steps": 0, "closed": 0, "envs_made": 0}

    async def _env(self, env_id: str, kwargs: Mapping[str, Any]) -> tuple[str, AsyncSysmathEnv]:
        kind = _kind(env_id, kwargs)
        spare = self.idle.get(kind)
        if spare:
            return kind, spare.pop()
        self.counts["envs_made"] += 1
        return kind, await make_async(env_id, **kwargs)

    async def describe(self, env_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The spaces and metadata of ``env_id`` made with ``kwargs`` (the router's ``RayEnv`` shows them)."""
        kind, env = await self._env(env_id, kwargs)
        try:
            return {"observation_space": env.env.observation_space, "action_space": env.env.action_space,
                    "metadata": dict(env.env.metadata)}
        finally:
            self.idle.setdefault(kind, []).append(env)

    async def open(self, env_id: str, kwargs: Mapping[str, Any], seed: int | None = None,
                   options: Mapping[str, Any] | None = None, episode_id: str | None = None, moved: bool = False,
                   close_first: str | None = None) -> tuple[str, Any, dict[str, Any]]:
        """Start an episode: ``(episode_id, observation, info)`` of its reset. Refused while
        draining, unless ``moved`` (an episode replayed off a lost node, which has nowhere better).
        ``close_first``: an episode of the caller's to close first (one call where there were two)."""
        if close_first is not None:
            await self.close(close_first)
        if self.draining and not moved:
            raise NodeDraining(f"node {self.node_id} is draining: it takes no new episodes")
        episode_id = episode_id or uuid.uuid4().hex
        if episode_id in self.episodes:
            raise ValueError(f"episode {episode_id} is already open on this node")
        kind, env = await self._env(env_id, kwargs)
        self.episodes[episode_id] = live = _Live(kind, env)
        try:
            observation, info = await env.reset(seed=seed, options=dict(options) if options is not None else None)
        except BaseException:
            self.episodes.pop(episode_id, None)
            live.done = True
            await self._retire(live)
            raise
        self.counts["opened"] += 1
        return episode_id, observation, info

    async def step(self, episode_id: str, action: Any) -> StepResult:
        live = self.episodes.get(episode_id)
        if live is None:
            raise KeyError(f"no episode {episode_id} on node {self.node_id} (closed, or never opened here)")
        result = await live.env.step(action)
        live.done = live.done or bool(result[2] or result[3])
        self.counts["steps"] += 1
        return result

    async def close(self, episode_id: str) -> bool:
        """End an episode (idempotent); its env is kept for reuse when the episode had ended."""
        live = self.episodes.pop(episode_id, None)
        if live is None:
            return False
        self.counts["closed"] += 1
        await self._retire(live)
        return True

    async def _retire(self, live: _Live) -> None:
        spare = self.idle.setdefault(live.kind, [])
        if live.done and not self.draining and len(spare) < self.idle_per_kind:
            spare.append(live.env)  # its episode is over, so it holds no container
        else:
            await live.env.close()

    async def drain(self, draining: bool = True) -> int:
        """Stop (or, with False, resume) taking new episodes; returns the live episodes left."""
        self.draining = draining
        if draining:
            spare = [env for envs in self.idle.values() for env in envs]
            self.idle.clear()
            await asyncio.gather(*(env.close() for env in spare))
        return len(self.episodes)

    async def health(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "alive": True, "draining": self.draining, "host": socket.gethostname(),
                "pid": os.getpid(), "live_episodes": len(self.episodes),
                "uptime_s": round(time.time() - self.started, 1)}

    async def capacity(self) -> dict[str, Any]:
        """Live episodes, the envs kept for reuse, the step pool and each sandbox pool's figures."""
        return {"node_id": self.node_id, "draining": self.draining, "live_episodes": len(self.episodes),
                "idle_envs": sum(len(envs) for envs in self.idle.values()), "step_threads": step_threads(),
                **self.counts, "pools": await run_blocking(_pool_stats)}

    async def shutdown(self) -> int:
        """Close every env of this node (their containers go with the pool); returns how many episodes were live."""
        live = list(self.episodes.values())
        self.episodes.clear()
        spare = [env for envs in self.idle.values() for env in envs]
        self.idle.clear()
        await asyncio.gather(*(item.env.close() for item in live), *(env.close() for env in spare),
                             return_exceptions=True)
        return len(live)


@dataclass(frozen=True)
class Replay:
    """An episode moved off a lost node: where from and to, how many steps were replayed, how
    long it took, and whether it went on (``"continued"``) or ended as a scoring error
    (``"diverged"``, ``"no_node"``)."""

    episode_id: str
    env_id: str
    seed: int | None
    from_node: str
    to_node: str | None
    steps_replayed: int
    seconds: float
    outcome: str
    detail: str = ""


@dataclass
class _Episode:
    """What the router keeps of one episode to replay it: its reset and what the caller saw."""

    episode_id: str
    env_id: str
    kwargs: dict[str, Any]
    seed: int | None
    options: dict[str, Any] | None
    node: str | None = None
    opened: bool = False
    reset_observation: Any = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    #: (action, observation, reward, terminated, truncated) of every step the caller got
    steps: list[tuple[Any, Any, float, bool, bool]] = field(default_factory=list)


class _Unscorable(Exception):
    """The episode cannot go on (its replay diverged, or no node is left)."""

    def __init__(self, message: str, lost_node: str):
        super().__init__(message)
        self.lost_node = lost_node


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for a call whose actor or node (or the result held there) is gone."""
    from ray import exceptions

    return exceptions.RayActorError, exceptions.NodeDiedError, exceptions.ObjectLostError


class SysmathRayService:
    """The router: node actors on the eligible nodes, episodes spread over them by load and kept
    each on its node, replayed elsewhere when the node is lost (see the module docstring).

    Make one with ``SysmathRayService.start(...)``; ``make_env(env_id, **kwargs)`` returns a
    Gymnasium env (``make_async_env`` its asyncio twin). ``replays`` lists the episodes moved.
    Thread-safe: one service may drive many envs from many threads.

    Arguments: ``allow_gpu_nodes`` places actors on GPU nodes too; ``resource`` / ``labels`` keep
    them to nodes holding that custom resource / carrying those labels; ``max_concurrency``:
    episodes one actor steps at once; ``num_cpus``: what each actor reserves (0: it mostly waits
    on containers, and takes no slot from the trainer's tasks); ``detached``: actors outlive the
    process that made them (give it when several trainer processes share the actors: otherwise
    they end with the first router's process); ``runtime_env``: the actors' Ray runtime env.
    """

    def __init__(self, *, allow_gpu_nodes: bool = False, resource: str | None = None,
                 labels: Mapping[str, str] | None = None, max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
                 num_cpus: float = 0.0, detached: bool = False, runtime_env: Mapping[str, Any] | None = None):
        self.allow_gpu_nodes = allow_gpu_nodes
        self.resource = resource
        self.labels = dict(labels or {})
        self.max_concurrency = max_concurrency
        self.num_cpus = num_cpus
        self.detached = detached
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.replays: list[Replay] = []
        self._actors: dict[str, Any] = {}  # node id -> actor handle, live nodes only
        self._created: set[str] = set()  # nodes whose actor this router made (``stop`` ends those)
        self._lost: dict[str, str] = {}  # node id -> why it was dropped
        self._draining: set[str] = set()
        self._load: dict[str, int] = {}  # this router's live episodes per node
        self._opened: dict[str, int] = {}  # episodes ever opened per node (spreads ties)
        self._spaces: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._owns_ray = False

    # ------------------------------------------------------------------ placement

    @classmethod
    def start(cls, address: str | None = None, **options: Any) -> SysmathRayService:
        """Join the cluster at ``address`` (None: ``RAY_ADDRESS`` or a new local instance) and put
        a node actor on every eligible node (``options``: this class's arguments)."""
        service = cls(**options)
        service._owns_ray = connect(address)
        service.refresh()
        if not service._actors:
            raise NoLiveNode(f"no Ray node fits the gym-sysmath service ({service._selection()}); "
                             "pass allow_gpu_nodes=True, or start CPU nodes")
        return service

    def _selection(self) -> str:
        parts = ["alive nodes with CPUs", "GPU nodes included" if self.allow_gpu_nodes else "no GPU"]
        if self.resource:
            parts.append(f"resource {self.resource!r}")
        if self.labels:
            parts.append(f"labels {self.labels}")
        return ", ".join(parts)

    def refresh(self) -> list[str]:
        """Put node actors on eligible nodes that have none (nodes that joined since); returns their ids."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        wanted = eligible_nodes(ray.nodes(), allow_gpu_nodes=self.allow_gpu_nodes, resource=self.resource,
                                labels=self.labels)
        with self._lock:
            new = [node for node in wanted if node not in self._actors and node not in self._lost]
        actor_class = ray.remote(SysmathNodeService)
        added = []
        for node in new:
            name = _actor_name(node)
            actor: Any
            try:
                actor = ray.get_actor(name, namespace=NAMESPACE)
                created = False
            except ValueError:
                options: dict[str, Any] = {
                    "name": name, "namespace": NAMESPACE, "get_if_exists": True, "num_cpus": self.num_cpus,
                    "max_concurrency": self.max_concurrency, "max_restarts": 0,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
                if self.detached:
                    options["lifetime"] = "detached"
                if self.runtime_env:
                    options["runtime_env"] = self.runtime_env
                actor = actor_class.options(**options).remote()
                created = True
            with self._lock:
                self._actors[node] = actor
                self._load.setdefault(node, 0)
                self._opened.setdefault(node, 0)
                if created:
                    self._created.add(node)
            added.append(node)
        # an actor that cannot start (its node died meanwhile) is dropped now, not at first use
        for node in added:
            try:
                ray.get(self._actors[node].health.remote(), timeout=120)
            except Exception as exc:  # any failure to come up drops the node
                self._mark_lost(node, f"its actor did not start: {type(exc).__name__}: {exc}")
        return [node for node in added if node in self._actors]

    def nodes(self) -> list[str]:
        """The live nodes' ids."""
        with self._lock:
            return list(self._actors)

    def _mark_lost(self, node: str, why: str) -> None:
        with self._lock:
            if self._actors.pop(node, None) is not None:
                logger.warning("gym-sysmath ray service: node %s lost (%s)", node, why[:300])
                self._lost[node] = why[:500]

    def _pick(self, avoid: set[str] | None = None, prefer: str | None = None) -> str | None:
        """The least loaded live node not draining (any live one when all drain), or None; of
        equally loaded ones ``prefer`` (where the env's last episode ran: its env is reused)."""
        with self._lock:
            candidates = [node for node in self._actors if node not in (avoid or ())]
            open_ones = [node for node in candidates if node not in self._draining]
            pool = open_ones or candidates
            if not pool:
                return None
            return min(pool, key=lambda node: (self._load[node], node != prefer, self._opened[node]))

    def _claim(self, episode: _Episode, avoid: set[str], prefer: str | None = None) -> tuple[str, Any] | None:
        """Put ``episode`` on the least loaded node (counted in its load at once, so episodes
        opened together spread); ``(node, actor)``, or None when no node is left."""
        with self._lock:
            node = self._pick(avoid, prefer)
            if node is None:
                return None
            avoid.add(node)
            episode.node = node
            self._load[node] += 1
            self._opened[node] += 1
            return node, self._actors[node]

    # ------------------------------------------------------------------ episodes

    def make_env(self, env_id: str, **kwargs: Any) -> RayEnv:
        """A Gymnasium env for ``env_id`` whose episodes run on the service's nodes."""
        key = _kind(env_id, kwargs)
        with self._lock:
            described = self._spaces.get(key)
        if described is None:
            described = self._call_any(lambda actor: actor.describe.remote(env_id, kwargs))
            with self._lock:
                self._spaces[key] = described
        return RayEnv(self, env_id, kwargs, described)

    async def make_async_env(self, env_id: str, **kwargs: Any) -> AsyncSysmathEnv:
        """``make_env`` for asyncio callers: ``await env.reset()``, ``await env.step()`` on the step pool."""
        return AsyncSysmathEnv(await run_blocking(self.make_env, env_id, **kwargs))

    def _call_any(self, call: Any) -> Any:
        """``call(actor)`` on a live node, trying the next when one is lost."""
        import ray

        tried: set[str] = set()
        while (node := self._pick(tried)) is not None:
            tried.add(node)
            actor = self._actors.get(node)
            if actor is None:
                continue
            try:
                return ray.get(call(actor))
            except _lost_errors() as exc:
                self._mark_lost(node, f"{type(exc).__name__}: {exc}")
        raise NoLiveNode(f"no live gym-sysmath node ({self._selection()}); lost: {self._lost}")

    def _open(self, episode: _Episode, previous: _Episode | None = None) -> tuple[Any, dict[str, Any]]:
        """Open ``episode`` on the least loaded node, closing ``previous`` (the env's last episode)."""
        import ray

        was_on = previous.node if previous is not None and previous.opened else None
        if previous is not None:
            self._release(previous.node, previous)
        tried: set[str] = set()
        while True:
            claimed = self._claim(episode, tried, was_on)
            if claimed is None:
                raise NoLiveNode(f"no gym-sysmath node takes new episodes (live: {self.nodes()}, draining: "
                                 f"{sorted(self._draining)}, lost: {self._lost})")
            node, actor = claimed
            close_first = None
            if was_on is not None and previous is not None:
                if was_on == node:
                    close_first = previous.episode_id
                elif (old := self._actors.get(was_on)) is not None:
                    old.close.remote(previous.episode_id)  # not awaited: the caller has moved on
                was_on = None
            try:
                _, observation, info = ray.get(actor.open.remote(episode.env_id, episode.kwargs, episode.seed,
                                                                 episode.options, episode.episode_id, False,
                                                                 close_first))
            except NodeDraining:
                self._release(node, episode)
                with self._lock:
                    self._draining.add(node)
                continue
            except _lost_errors() as exc:
                self._release(node, episode)
                self._mark_lost(node, f"{type(exc).__name__}: {exc}")
                continue
            except BaseException:
                self._release(node, episode)
                raise
            episode.opened = True
            episode.reset_observation, episode.reset_info = observation, info
            return observation, info

    def _release(self, node: str | None, episode: _Episode) -> None:
        with self._lock:
            if node is not None and episode.node == node:
                self._load[node] = max(0, self._load.get(node, 0) - 1)
                episode.node = None

    def _step(self, episode: _Episode, action: Any) -> StepResult:
        import ray

        moved_from: str | None = None
        while True:
            node = episode.node
            actor = self._actors.get(node) if node is not None else None
            if actor is not None:
                try:
                    result = ray.get(actor.step.remote(episode.episode_id, action))
                except _lost_errors() as exc:
                    self._mark_lost(node, f"{type(exc).__name__}: {exc}")  # type: ignore[arg-type]
                else:
                    break
            lost = node or "unknown"
            try:
                self._replay(episode, lost)
            except _Unscorable as failure:
                observation, reward, terminated, truncated, info = remote_scoring_error(
                    str(failure), task_id=episode.reset_info.get("task_id"),
                    family=episode.reset_info.get("family"), turn=len(episode.steps) + 1)
                info["lost_node"] = failure.lost_node
                return observation, reward, terminated, truncated, info
            moved_from = lost
        observation, reward, terminated, truncated, info = result
        episode.steps.append((action, observation, reward, terminated, truncated))
        if moved_from is not None:
            info = {**info, "replayed_from_node": moved_from}
        return observation, reward, terminated, truncated, info

    def _replay(self, episode: _Episode, lost: str) -> None:
        """Move ``episode`` off the lost node: reset it on another and re-step what the caller saw,
        checking each result; raises ``_Unscorable`` when that cannot be done faithfully."""
        import ray

        self._release(lost, episode)
        began = time.perf_counter()
        tried: set[str] = {lost}
        while True:
            claimed = self._claim(episode, tried)
            if claimed is None:
                with contextlib.suppress(Exception):
                    self.refresh()
                claimed = self._claim(episode, tried)
            if claimed is None:
                message = (f"node_lost: node {lost} was lost mid-episode and no live gym-sysmath node is left to "
                           f"replay it on")
                self._record(episode, lost, None, 0, began, "no_node", message)
                raise _Unscorable(message, lost)
            target, actor = claimed
            try:
                divergence = self._replay_on(actor, episode)
            except _lost_errors() as exc:
                self._release(target, episode)
                self._mark_lost(target, f"{type(exc).__name__}: {exc}")
                continue
            except Exception as exc:  # the replay raised where the original did not: it diverged
                divergence = f"the replay raised {type(exc).__name__}: {str(exc)[:200]}"
            if divergence is None:
                self._record(episode, lost, target, len(episode.steps), began, "continued")
                return
            self._release(target, episode)
            with contextlib.suppress(Exception):
                ray.get(actor.close.remote(episode.episode_id), timeout=QUERY_TIMEOUT_S)
            message = (f"node_lost: node {lost} was lost mid-episode and its replay on node {target} diverged "
                       f"({divergence}): the episode is not deterministic, so it cannot be scored")
            self._record(episode, lost, target, len(episode.steps), began, "diverged", message)
            raise _Unscorable(message, lost)

    @staticmethod
    def _replay_on(actor: Any, episode: _Episode) -> str | None:
        """Reset and re-step ``episode`` on ``actor``; the first difference from what the caller
        saw, or None when every observation and reward is the same."""
        import ray

        _, observation, _ = ray.get(actor.open.remote(episode.env_id, episode.kwargs, episode.seed,
                                                      episode.options, episode.episode_id, True))
        if observation != episode.reset_observation:
            return "its reset observation differs"
        for turn, (action, *seen) in enumerate(episode.steps, start=1):
            observation, reward, terminated, truncated, _ = ray.get(actor.step.remote(episode.episode_id, action))
            if [observation, reward, terminated, truncated] != seen:
                return f"step {turn} returned a different observation or reward"
        return None

    def _record(self, episode: _Episode, lost: str, target: str | None, steps: int, began: float, outcome: str,
                detail: str = "") -> None:
        replay = Replay(episode.episode_id, episode.env_id, episode.seed, lost, target, steps,
                        round(time.perf_counter() - began, 4), outcome, detail)
        with self._lock:
            self.replays.append(replay)
        logger.warning("gym-sysmath ray service: episode %s moved off lost node %s: %s", episode.episode_id, lost,
                       outcome)

    def _close(self, episode: _Episode) -> None:
        node = episode.node
        actor = self._actors.get(node) if node is not None else None
        self._release(node, episode)
        if actor is not None and episode.opened:
            actor.close.remote(episode.episode_id)  # not awaited: the caller has moved on

    # ------------------------------------------------------------------ operations

    def _query(self, method: str, *args: Any) -> dict[str, Any]:
        """``method`` on every live node, at once; an unreachable node reports its error."""
        import ray

        with self._lock:
            actors = dict(self._actors)
        refs = {node: getattr(actor, method).remote(*args) for node, actor in actors.items()}
        answers: dict[str, Any] = {}
        for node, ref in refs.items():
            try:
                answers[node] = ray.get(ref, timeout=QUERY_TIMEOUT_S)
            except _lost_errors() as exc:
                self._mark_lost(node, f"{type(exc).__name__}: {exc}")
                answers[node] = {"node_id": node, "alive": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
            except Exception as exc:  # a timeout: reported, the node kept
                answers[node] = {"node_id": node, "alive": None, "error": f"{type(exc).__name__}: {exc}"[:500]}
        return answers

    def health(self) -> dict[str, dict[str, Any]]:
        """Each node's health (``alive``, ``draining``, ``live_episodes``...), lost nodes included."""
        answers = self._query("health")
        with self._lock:
            for node, why in self._lost.items():
                answers.setdefault(node, {"node_id": node, "alive": False, "error": why})
        return answers

    def capacity(self) -> dict[str, Any]:
        """Per node: live episodes, reusable envs, the step pool and each sandbox pool's figures
        (``reserve`` = clean containers waiting); with totals over the live nodes."""
        nodes = self._query("capacity")
        with self._lock:
            routed = dict(self._load)
        reachable = [entry for entry in nodes.values() if "live_episodes" in entry]
        return {"nodes": nodes, "routed_here": routed,
                "live_episodes": sum(entry["live_episodes"] for entry in reachable),
                "reserve": sum(pool["reserve"] for entry in reachable for pool in entry["pools"]),
                "accepting_nodes": [entry["node_id"] for entry in reachable if not entry["draining"]]}

    def drain(self, node: str, timeout_s: float = 0.0) -> int:
        """Stop new episodes on ``node`` (for every router: the actor refuses them); its live ones
        finish there. Waits up to ``timeout_s`` for them; returns how many are still live."""
        import ray

        with self._lock:
            actor = self._actors.get(node)
            self._draining.add(node)
        if actor is None:
            raise KeyError(f"node {node} has no live gym-sysmath actor; nodes: {self.nodes()}")
        left = ray.get(actor.drain.remote(True), timeout=QUERY_TIMEOUT_S)
        deadline = time.monotonic() + timeout_s
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = ray.get(actor.health.remote(), timeout=QUERY_TIMEOUT_S)["live_episodes"]
        return int(left)

    def resume(self, node: str) -> None:
        """Let a drained node take new episodes again."""
        import ray

        with self._lock:
            actor = self._actors.get(node)
            self._draining.discard(node)
        if actor is not None:
            ray.get(actor.drain.remote(False), timeout=QUERY_TIMEOUT_S)

    def stop(self) -> None:
        """Close the node actors this router made (their envs and containers with them), and the
        Ray connection when ``start`` made it. Actors another router made are left to it."""
        import ray

        with self._lock:
            mine = {node: actor for node, actor in self._actors.items() if node in self._created}
            self._actors.clear()
        if mine:
            with contextlib.suppress(Exception):
                ray.get([actor.shutdown.remote() for actor in mine.values()], timeout=60)
            for actor in mine.values():
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> SysmathRayService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RayEnv(gym.Env):
    """A Gymnasium env whose episodes run on a ``SysmathRayService`` node: ``reset`` opens one on
    the least loaded node, ``step`` keeps it there (or replays it elsewhere when the node is
    lost), ``close`` ends it. The spaces and metadata are the remote env's.

    ``reset(seed=None)`` sends the remote env a seed drawn from this env's ``np_random`` (seeded
    by the last ``reset(seed=...)``), so every episode can be replayed: the tasks drawn are as
    random as a local env's, though not the same sequence a local env would draw."""

    def __init__(self, service: SysmathRayService, env_id: str, kwargs: Mapping[str, Any],
                 described: Mapping[str, Any]):
        self.service = service
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.observation_space = described["observation_space"]
        self.action_space = described["action_space"]
        self.metadata = dict(described["metadata"])
        self.episode: _Episode | None = None
        self._done = False

    @property
    def node(self) -> str | None:
        """The node the current episode runs on."""
        return self.episode.node if self.episode is not None else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        previous, self.episode = self.episode, None
        if seed is None:  # every episode gets a seed, so any of them can be replayed on another node
            seed = int(self.np_random.integers(2**31))
        episode = _Episode(uuid.uuid4().hex, self.env_id, self.kwargs, seed,
                           dict(options) if options is not None else None)
        result = self.service._open(episode, previous)
        self.episode, self._done = episode, False
        return result

    def step(self, action: Any) -> StepResult:
        if self.episode is None or self._done:
            raise gym.error.ResetNeeded("call reset() before step(): the episode is over or has not started")
        result = self.service._step(self.episode, action)
        self._done = bool(result[2] or result[3])
        return result

    def close(self) -> None:
        if self.episode is not None:
            self.service._close(self.episode)
            self.episode = None
        super().close()

    def __repr__(self) -> str:
        return f"RayEnv({self.env_id!r}, node={self.node})"
