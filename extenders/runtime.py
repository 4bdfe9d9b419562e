"""What one replica runs beside its HTTP server: the snapshot cache, leader election with the
watcher while leading, and the sweeper that expires assumed pods and compacts tombstones.

The FastAPI lifespan creates one ``ClusterRuntime`` per process and calls ``start``/``stop``;
routes call ``snapshot``, ``readiness`` and ``node_document``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aredis
from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait, raise_if_cancelling
from extenders.features import Features, parse_version
from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client
from extenders.kube.events import EventLimits, EventRecorder
from extenders.kube.version import follow_version
from extenders.logs import FailureLog
from extenders.model import NodeInfo
from extenders.snapshot import Snapshot
from extenders.sync.cache import SnapshotCache
from extenders.sync.leader import LeaderElector
from extenders.sync.store import Store
from extenders.sync.watcher import Watcher
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass
class RuntimeConfig:
    prefix: str = "extender"
    replica_id: str = ""  # default: hostname-pid
    lease_seconds: float = 15.0
    assumed_ttl_seconds: float = 60.0
    kube_mode: str = "auto"  # "auto": in-cluster or a kubeconfig if found, else no watcher; "off"; "on"
    kubeconfig: str | None = None  # explicit path; else $KUBECONFIG / in-cluster / ~/.kube/config
    kube_url: str | None = None  # explicit API server URL (tests); token via kube_token
    kube_token: str | None = None
    kube_transport: str = "aiohttp"  # see extenders.kube.transport
    kube_timeout_seconds: float = 10.0  # each plain API request, the bind's Binding among them
    tombstone_keep_seconds: float = 600.0  # replicas idle longer than this reload in full
    sweep_interval_seconds: float | None = None  # default: a tenth of the assumed TTL, 0.5 s to 5 s
    readiness_timeout_seconds: float = 2.0
    events: bool = True  # write Kubernetes Events (when an API server is configured)
    event_limits: EventLimits = field(default_factory=EventLimits)
    # The kube-scheduler release to follow ("1.31"); None: the API server's (see extenders.features).
    kube_version: str | None = None
    min_replicas_ack: int = 0  # Redis replicas that must hold a reservation before the API binds (see Store)
    replicas_ack_timeout_seconds: float = 1.0


LeaderWork = Callable[[], Coroutine[Any, Any, None]]


class ClusterRuntime:
    """One replica's view of and contribution to the shared cluster state."""

    def __init__(self, redis: aredis.Redis, config: RuntimeConfig, telemetry: Telemetry | None = None) -> None:
        self.config = config
        self.replica_id = config.replica_id or default_replica_id()
        self.redis = redis
        self.telemetry = telemetry or Telemetry()
        self.store = Store(
            redis,
            config.prefix,
            min_replicas_ack=config.min_replicas_ack,
            ack_timeout=config.replicas_ack_timeout_seconds,
        )
        self.cache = SnapshotCache(self.store, telemetry=self.telemetry)
        # Where the followed release comes from: "setting", "cluster" (once read) or "default".
        self.version_source = "default"
        if config.kube_version:
            self.cache.follow(parse_version(config.kube_version))
            self.version_source = "setting"
        http = build_http_client(
            config.kube_mode,
            config.kubeconfig,
            config.kube_url,
            config.kube_token,
            transport=config.kube_transport,
            timeout=config.kube_timeout_seconds,
        )
        self.kube: KubeClient | None = KubeClient(http) if http is not None else None
        self.events = EventRecorder(
            self.kube, self.telemetry, instance=self.replica_id, limits=config.event_limits, enabled=config.events
        )
        self.elector: LeaderElector | None = (
            LeaderElector(self.store, self.replica_id, self._lead, config.lease_seconds, telemetry=self.telemetry)
            if self.kube
            else None
        )
        self.telemetry.leader.set_function(lambda: 1.0 if self.is_leader() else 0.0)
        self.telemetry.snapshot_generation.set_function(lambda: float(self.cache.current.generation))
        self.watcher: Watcher | None = None
        self._leader_work: list[LeaderWork] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._gen_samples: deque[tuple[float, int]] = deque()
        self._gen_store_id = ""

    @property
    def sweep_interval(self) -> float:
        if self.config.sweep_interval_seconds is not None:
            return self.config.sweep_interval_seconds
        return min(5.0, max(0.5, self.config.assumed_ttl_seconds / 10))

    def add_leader_work(self, work: LeaderWork) -> None:
        """Run ``work()`` beside the watcher while this replica leads (cancelled when it stops leading)."""
        self._leader_work.append(work)

    async def start(self) -> None:
        self.events.start()
        if self.elector is not None:
            self._tasks.append(self.elector.start())
        self._tasks.append(asyncio.create_task(self._sweep_loop(), name="assumed-sweeper"))
        self._tasks.append(asyncio.create_task(self._initial_load(), name="snapshot-initial-load"))
        if self.kube is not None and self.version_source != "setting":
            self._tasks.append(asyncio.create_task(follow_version(self.kube, self._follow), name="kube-version"))

    def _follow(self, features: Features) -> None:
        self.cache.follow(features)
        self.version_source = "cluster"

    async def stop(self) -> None:
        if self.elector is not None:
            await self.elector.stop()
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()
        await self.events.stop()
        if self.kube is not None:
            await self.kube.aclose()

    async def snapshot(self) -> Snapshot:
        return await self.cache.refresh()

    def held_snapshot(self, max_age: float) -> Snapshot | None:
        return self.cache.held(max_age)

    async def sample_metrics(self) -> None:
        """Refresh the gauges read from Redis, when metrics are scraped."""
        self.telemetry.cluster_generation.set(await self.store.generation())

    def is_leader(self) -> bool:
        return self.elector is not None and self.elector.is_leader

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready when Redis answers, the store is synced (if a watcher feeds it) and our snapshot loaded."""
        details: dict[str, Any] = {
            "replica_id": self.replica_id,
            "redis": False,
            "kube": self.kube is not None,
            "synced": None,
            "leader": None,
            "is_leader": self.is_leader(),
            "snapshot_loaded": self.cache.loaded,
            "generation": self.cache.current.generation,
            "kube_version": self.cache.current.features.name,
            "kube_version_source": self.version_source,
        }
        timeout = self.config.readiness_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                await self.redis.ping()
                details["redis"] = True
                if self.kube is not None:
                    details["synced"] = await self.store.synced() is not None
                    details["leader"] = await self.store.leader()
                snap = await self.cache.refresh()
                details["snapshot_loaded"] = self.cache.loaded
                details["generation"] = snap.generation
        except (RedisError, OSError, TimeoutError) as exc:
            details["error"] = f"{type(exc).__name__}: {exc}"
        if self.kube is None:
            details["mode"] = "standalone" if self.config.kube_mode == "off" else "no-cluster"
        ready = bool(details["redis"] and details["synced"] is not False and details["snapshot_loaded"])
        if details.get("mode") == "no-cluster":
            # Nothing feeds the snapshot: every node name kube-scheduler sends would be unknown here.
            ready = False
            details["reason"] = (
                "no Kubernetes API found (no kubeconfig, no service account): set KUBECONFIG or "
                "EXTENDER_KUBE_URL, or EXTENDER_KUBE_MODE=off to serve only what requests carry"
            )
        elif not ready and "error" not in details:
            details["reason"] = (
                "the leader has not finished its initial list yet"
                if details["synced"] is False
                else "the snapshot is not loaded yet"
            )
        return ready, details

    async def _lead(self, epoch: int) -> None:
        assert self.kube is not None
        watcher = Watcher(self.kube, self.store, epoch, telemetry=self.telemetry)
        self.watcher = watcher
        side = [asyncio.create_task(self._keep_running(work), name="leader-side-work") for work in self._leader_work]
        try:
            await watcher.run()
        finally:
            for task in side:
                await cancel_and_wait(task)

    @staticmethod
    async def _keep_running(work: LeaderWork) -> None:
        """Side work of the leader must not end the term when it fails: restart it after a pause."""
        while True:
            try:
                await work()
                return
            except Exception:
                log.exception("leader work failed; restarting it in 5s")
                await asyncio.sleep(5.0)

    async def _initial_load(self) -> None:
        delay = 0.2
        failures = FailureLog(log, "initial snapshot load")
        while not self.cache.loaded:
            raise_if_cancelling()
            try:
                await self.cache.refresh()
            except (RedisError, OSError) as exc:
                failures.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        failures.succeeded()

    async def _sweep_loop(self) -> None:
        failures = FailureLog(log, "assumed-pod sweep")
        while True:
            raise_if_cancelling()
            await asyncio.sleep(self.sweep_interval)
            try:
                expired = await self.store.expire_assumed()
                if expired:
                    log.info("expired %d assumed pods never confirmed: %s", len(expired), ", ".join(expired[:10]))
                if self.is_leader():
                    await self._compact()
            except (RedisError, OSError) as exc:
                failures.failed(exc)
                continue
            failures.succeeded()

    async def _compact(self) -> None:
        """Drop tombstones older than ``tombstone_keep_seconds`` (sampled generations, so no clock in Redis)."""
        now = time.monotonic()
        samples = self._gen_samples
        if not samples or now - samples[-1][0] >= min(60.0, self.config.tombstone_keep_seconds / 4):
            store_id, gen = await self.store.store_id(), await self.store.generation()
            if store_id != self._gen_store_id:
                # Redis lost its data: generations sampled before belong to another history, and
                # compacting up to one of them would raise the floor above every replica.
                samples.clear()
                self._gen_store_id = store_id
            samples.append((now, gen))
        upto = 0
        while samples and now - samples[0][0] >= self.config.tombstone_keep_seconds:
            upto = samples.popleft()[1]
        if upto:
            await self.store.compact(upto)


def node_document(info: NodeInfo) -> dict[str, Any]:
    """A node's aggregate for ``GET /v1/nodes/{name}``: integers in base units (CPU in millicores)."""
    facts = info.node
    pods = sorted(info.pods.values(), key=lambda p: (p.namespace, p.name))
    return {
        "name": info.name,
        "generation": info.generation,
        "exists": facts is not None,
        "allocatable": dict(info.allocatable),
        "requested": info.requested_with_pods(),
        "nonzero_requested": {"cpu": info.nonzero_cpu, "memory": info.nonzero_memory},
        "pods": [{"namespace": p.namespace, "name": p.name, "uid": p.uid, "assumed": p.assumed} for p in pods],
        "labels": dict(facts.labels) if facts else {},
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in facts.taints] if facts else [],
        "unschedulable": facts.unschedulable if facts else False,
        "conditions": dict(facts.conditions) if facts else {},
    }
