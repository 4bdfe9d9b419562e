"""A gang taken whole by preemption: the members kube-scheduler does not evict, the extender does.

kube-scheduler evicts victims on one node only. When its victims there take a gang below its minimum,
the preempt verb records the gang (``GangEviction``): which of its members kube-scheduler is to evict
on that node (the trigger) and which live on other nodes. The watch leader's evictor waits for the
trigger: once one of those members is gone or leaving (kube-scheduler picked that node), it evicts the
rest as kube-scheduler evicts its victims (a DisruptionTarget condition, then a delete with the pod's
UID as precondition), with an Event on each pod and on the PodGroup. A record whose trigger never
comes (kube-scheduler picked no node, or another preemption cycle won) expires.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import redis.asyncio as aredis
from redis.exceptions import RedisError

from extenders.aio import every
from extenders.gang import reasons
from extenders.kube.client import KubeApiError, KubeClient
from extenders.kube.events import EventRecorder, ObjectRef
from extenders.kube.requeue import PodRef
from extenders.logs import FailureLog
from extenders.pdb import is_leaving
from extenders.snapshot import Snapshot
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

# kube-scheduler evicts its victims right after it picks the node; this is the margin.
RECORD_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class GangEviction:
    """A gang that goes whole with the members kube-scheduler evicts on ``node``: once those are
    gone, the extender evicts ``members`` (the gang's members on other nodes)."""

    gang: str
    node: str
    preemptor: str  # namespace/name
    trigger: tuple[str, ...]  # uids of the gang's victims on ``node``
    members: tuple[PodRef, ...]


class EvictionStore:
    """The recorded gang evictions in Redis: one hash, gang -> record with its deadline (epoch ms)."""

    def __init__(self, redis: aredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.key = f"{prefix}:gangevict"

    async def record(self, evictions: Sequence[GangEviction], seconds: float = RECORD_SECONDS) -> None:
        until = int((time.time() + seconds) * 1000)
        await self.redis.hset(
            self.key,
            mapping={
                e.gang: orjson.dumps(
                    {"node": e.node, "by": e.preemptor, "trigger": e.trigger, "members": e.members, "until": until}
                )
                for e in evictions
            },
        )

    async def pending(self) -> list[tuple[GangEviction, int]]:
        """Every record with its deadline; unreadable ones are dropped."""
        out: list[tuple[GangEviction, int]] = []
        raw: dict[Any, Any] = await self.redis.hgetall(self.key)
        for field_, value in raw.items():
            gang = field_.decode() if isinstance(field_, bytes) else str(field_)
            try:
                doc = orjson.loads(value)
                eviction = GangEviction(
                    gang,
                    str(doc["node"]),
                    str(doc["by"]),
                    tuple(str(u) for u in doc["trigger"]),
                    tuple((str(uid), str(ref)) for uid, ref in doc["members"]),
                )
                out.append((eviction, int(doc["until"])))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("dropping an unreadable gang eviction record for %s", gang)
                await self.done(gang)
        return out

    async def done(self, gang: str) -> None:
        await self.redis.hdel(self.key, gang)


class GangEvictor:
    """The watch leader's loop: evicts the rest of each recorded gang once its trigger has gone."""

    def __init__(
        self,
        store: EvictionStore,
        kube: KubeClient,
        snapshot: Callable[[], Awaitable[Snapshot]],
        events: EventRecorder,
        telemetry: Telemetry,
        interval: float = 0.5,
    ) -> None:
        self.store = store
        self.kube = kube
        self.snapshot = snapshot
        self.events = events
        self.telemetry = telemetry
        self.interval = interval

    async def run(self) -> None:
        errors = (RedisError, OSError, httpx.HTTPError, KubeApiError)
        await every(self.interval, self.evict_due, FailureLog(log, "gang evictions"), errors)

    async def evict_due(self) -> list[str]:
        """One pass; returns the gangs whose remaining members were evicted."""
        records = await self.store.pending()
        if not records:
            return []
        snapshot = await self.snapshot()
        now = time.time() * 1000
        evicted: list[str] = []
        for eviction, until in records:
            if not any(_gone(snapshot, uid) for uid in eviction.trigger):
                if now > until:
                    log.info(
                        "gang %s: kube-scheduler did not preempt on node %s; nothing more evicted",
                        eviction.gang,
                        eviction.node,
                    )
                    await self.store.done(eviction.gang)
                continue
            await self._evict(eviction, snapshot)
            await self.store.done(eviction.gang)
            evicted.append(eviction.gang)
        return evicted

    async def _evict(self, eviction: GangEviction, snapshot: Snapshot) -> None:
        message = (
            f"preempted with its gang {eviction.gang}, which goes whole: its members on node {eviction.node} "
            f"were preempted by pod {eviction.preemptor}"
        )
        gone = 0
        for uid, ref in eviction.members:
            namespace, _, name = ref.partition("/")
            if await self.kube.preempt_pod(namespace, name, uid, f"kube-gang-extender: {message}"):
                gone += 1
                ref_ = ObjectRef.pod(namespace, name, uid)
                self.events.record(ref_, reasons.TYPES[reasons.PREEMPTED], reasons.PREEMPTED, message)
        group = snapshot.podgroups.get(eviction.gang)
        if group is not None:
            self.events.record(
                ObjectRef.podgroup(group.namespace, group.name, group.uid),
                reasons.TYPES[reasons.GANG_PREEMPTED],
                reasons.GANG_PREEMPTED,
                f"gang {eviction.gang} was preempted whole by pod {eviction.preemptor}: its members on node "
                f"{eviction.node} by kube-scheduler, {gone} more elsewhere by the extender",
            )
        self.telemetry.gang_preemptions.inc()
        log.info(
            "gang %s preempted whole for %s: %d member(s) evicted beside node %s",
            eviction.gang,
            eviction.preemptor,
            gone,
            eviction.node,
        )


def _gone(snapshot: Snapshot, uid: str) -> bool:
    pod = snapshot.find_pod(uid)
    return pod is None or is_leaving(pod)
