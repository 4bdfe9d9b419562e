"""A gang taken whole by preemption: the members kube-scheduler does not evict, the extender does.

kube-scheduler evicts victims on one node only. When its victims there take a gang below its minimum,
the preempt verb records the gang (``GangEviction``): which of its members kube-scheduler is to evict
on that node (the trigger), which live on other nodes, and its minimum. The watch leader's evictor
waits for the trigger: once one of those members is gone or leaving (kube-scheduler picked that node)
and fewer than the minimum of the others are left, it evicts the rest as kube-scheduler evicts its
victims (a DisruptionTarget condition, then a delete with the pod's UID as precondition), with an Event
on each pod and on the PodGroup. A record whose trigger never comes (kube-scheduler picked no node, or
another preemption cycle won) expires. Records are kept per gang and node: preemptions of several pods
may each take the same gang on another node.

Since 1.33 kube-scheduler evicts asynchronously, so the next preemptor's cycle may be decided before a
victim's deletion is seen. The preempt verb therefore marks the victims of an answer with one node
(``mark_preempting``): the next decisions take them as leaving, so a gang two preemptions break
together is seen broken by the second, which records nothing more. The evictor itself counts only what
the snapshot says, so a mark that turns out wrong (kube-scheduler's own checks refused the node) evicts
nothing. A decision that counts a gang broken only because of such marks says so on the records of the
marked members (``relied``): when kube-scheduler's eviction of a marked trigger failed while that second
preemption took the gang's other members, the record evicts its trigger too, so no part of the gang is
left.

Each answer is also kept for its preemptor (``victims_for``): kube-scheduler retries a preemptor once
its own informer sees the victims go, which can be before the snapshot does, and the preemptor's filter
and bind must not refuse it the room its own preemption made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

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
# How long a victim of an answer stays marked as leaving: its deletion shows in the snapshot well before.
PREEMPTING_SECONDS = 10.0
# How long a preemptor's answers are kept for it: past its victims' graceful termination (30 s by
# default), up to kube-scheduler's longest wait before it retries an unschedulable pod (five minutes).
PREEMPTOR_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class GangEviction:
    """A gang that goes whole with the members kube-scheduler evicts on ``node``: once those are
    gone, the extender evicts ``members`` (the gang's members on other nodes); see ``left``."""

    gang: str
    node: str
    preemptor: str  # namespace/name
    trigger: tuple[str, ...]  # uids of the gang's victims on ``node``
    members: tuple[PodRef, ...]
    minimum: int = 1  # the gang's minimum: fewer of ``members`` left than this, and they are evicted
    # A later preemption counted the gang broken only because this record's trigger was leaving (kept
    # beside the record, not in it: see EvictionStore.record).
    relied: bool = False

    @property
    def field(self) -> str:
        return eviction_field(self.gang, self.node)

    def left(self, snapshot: Snapshot) -> list[PodRef] | None:
        """The members still to evict once the gang is below its minimum; None while it may survive.

        Normally kube-scheduler has taken the trigger. But when its eviction of the trigger failed and a
        later preemption that relied on this record took members elsewhere instead, the trigger goes
        too. Without that reliance, members elsewhere that went finished or were taken for reasons of
        their own, and the trigger is left alone."""
        left = [m for m in self.members if not _gone(snapshot, m[0])]
        if any(_gone(snapshot, uid) for uid in self.trigger):
            return left if len(left) < self.minimum else None
        if not self.relied or len(left) == len(self.members):
            return None
        here = [(uid, pod.key) for uid in self.trigger if (pod := snapshot.find_pod(uid)) is not None]
        return [*here, *left] if len(here) + len(left) < self.minimum else None


def eviction_field(gang: str, node: str) -> str:
    """The field of a gang's record for ``node`` (and of the mark that a decision relied on it)."""
    return f"{gang}|{node}"


class Preempting(NamedTuple):
    """What the preempt verb reads before it decides."""

    evicting: frozenset[str]  # victims of answers with one node: kube-scheduler is evicting them
    offered: frozenset[str]  # every victim of recent answers
    answered: dict[str, frozenset[str]]  # the preemptor's own recent answers, by node


class EvictionStore:
    """The recorded gang evictions in Redis: one hash, ``gang|node`` -> record with its deadline (epoch
    ms), and one of the records later decisions relied on, ``gang|node`` -> deadline; and the victims of
    recent answers, a sorted set of uids scored by when their mark ends."""

    def __init__(self, redis: aredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix
        self.key = f"{prefix}:gangevict"
        self.relied_key = f"{prefix}:gangevictrelied"
        self.preempting_key = f"{prefix}:preempting"
        self.offered_key = f"{prefix}:preemptoffered"

    async def record(
        self, evictions: Sequence[GangEviction], relied: Sequence[str] = (), seconds: float = RECORD_SECONDS
    ) -> None:
        """Write ``evictions``, and mark the records ``relied`` names (fields) as relied on, together."""
        until = int((time.time() + seconds) * 1000)
        async with self.redis.pipeline(transaction=True) as pipe:
            if evictions:
                pipe.hset(
                    self.key,
                    mapping={
                        e.field: orjson.dumps(
                            {
                                "gang": e.gang,
                                "node": e.node,
                                "by": e.preemptor,
                                "trigger": e.trigger,
                                "members": e.members,
                                "min": e.minimum,
                                "until": until,
                            }
                        )
                        for e in evictions
                    },
                )
            if relied:
                pipe.hset(self.relied_key, mapping=dict.fromkeys(relied, until))
            await pipe.execute()

    async def pending(self, tidy: bool = False) -> list[tuple[GangEviction, int]]:
        """Every readable record with its deadline. ``tidy`` (the watch leader's pass): unreadable
        records and ended reliance marks are dropped, and records written per gang, before they were
        kept per node, are moved under their node's field; without it this only reads, as gang filters
        and binds call it."""
        out: list[tuple[GangEviction, int]] = []
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.key)
            pipe.hgetall(self.relied_key)
            raw, relied_raw = await pipe.execute()
        now = int(time.time() * 1000)
        relied = {_text(f) for f, until in relied_raw.items() if _deadline(until) >= now}
        if tidy and len(relied) < len(relied_raw):
            await self.redis.hdel(self.relied_key, *(f for f in relied_raw if _text(f) not in relied))
        for field_, value in raw.items():
            name = _text(field_)
            try:
                doc = orjson.loads(value)
                gang, node = str(doc.get("gang") or name.partition("|")[0]), str(doc["node"])
                eviction = GangEviction(
                    gang,
                    node,
                    str(doc["by"]),
                    tuple(str(u) for u in doc["trigger"]),
                    tuple((str(uid), str(ref)) for uid, ref in doc["members"]),
                    int(doc.get("min") or 1),
                    eviction_field(gang, node) in relied,
                )
                until = int(doc["until"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                if tidy:
                    log.warning("dropping an unreadable gang eviction record %s", name)
                    await self.redis.hdel(self.key, name)
                continue
            out.append((eviction, until))
            if tidy and name != eviction.field:
                await self.redis.hset(self.key, eviction.field, value)
                await self.redis.hdel(self.key, name)
        return out

    async def going_whole(self, gang: str, snapshot: Snapshot) -> GangEviction | None:
        """A record by which ``gang`` goes whole as ``snapshot`` stands (its ``left`` not None), if any."""
        for eviction, _until in await self.pending():
            if eviction.gang == gang and eviction.left(snapshot) is not None:
                return eviction
        return None

    async def done(self, *fields: str) -> None:
        if fields:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hdel(self.key, *fields)
                pipe.hdel(self.relied_key, *fields)
                await pipe.execute()

    async def mark_preempting(
        self, nodes: Mapping[str, Sequence[str]], *, preemptor: str = "", seconds: float = PREEMPTING_SECONDS
    ) -> None:
        """Mark the victims of a preempt answer (node -> victim uids) for a while: every one as offered
        (kube-scheduler may evict it), and with one node as being evicted too (kube-scheduler can only
        pick that node). With ``preemptor`` (its uid), the answer is also kept for it (``victims_for``)."""
        evicting = next(iter(nodes.values())) if len(nodes) == 1 else ()
        offered = [uid for victims in nodes.values() for uid in victims]
        now = int(time.time() * 1000)
        until = now + int(seconds * 1000)
        async with self.redis.pipeline(transaction=True) as pipe:
            for key, marked in ((self.preempting_key, evicting), (self.offered_key, offered)):
                pipe.zremrangebyscore(key, "-inf", now)
                if marked:
                    pipe.zadd(key, dict.fromkeys(marked, until))
            if preemptor and nodes:
                key = self.preemptor_key(preemptor)
                pipe.hset(key, mapping={node: orjson.dumps(list(victims)) for node, victims in nodes.items()})
                pipe.pexpire(key, int(PREEMPTOR_SECONDS * 1000))
            await pipe.execute()

    def preemptor_key(self, uid: str) -> str:
        return f"{self.prefix}:preemptfor:{uid}"

    async def victims_for(self, preemptor: str) -> dict[str, frozenset[str]]:
        """The victims recent answers offered the pod with uid ``preemptor``, by node (unreadable
        entries left out): kube-scheduler may have evicted those of the node it picked."""
        return _answers(await self.redis.hgetall(self.preemptor_key(preemptor)))

    async def preempting(self, preemptor: str = "") -> Preempting:
        """The uids marked by ``mark_preempting`` whose mark has not ended, and with ``preemptor`` (a
        pod's uid) that pod's answers as ``victims_for`` gives them: one round trip for the preempt verb."""
        now = int(time.time() * 1000)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrangebyscore(self.preempting_key, now, "+inf")
            pipe.zrangebyscore(self.offered_key, now, "+inf")
            if preemptor:
                pipe.hgetall(self.preemptor_key(preemptor))
            replies = await pipe.execute()
        return Preempting(_uids(replies[0]), _uids(replies[1]), _answers(replies[2]) if preemptor else {})


class GangEvictor:
    """The watch leader's loop: evicts the rest of each recorded gang once it is below its minimum."""

    def __init__(
        self,
        store: EvictionStore,
        kube: KubeClient,
        snapshot: Callable[[], Awaitable[Snapshot]],
        events: EventRecorder,
        telemetry: Telemetry,
        interval: float = 0.5,
        placed: Callable[[Snapshot, str], Sequence[PodRef]] | None = None,
    ) -> None:
        """``placed``: the gang's members placed (bound or held at bind) in a snapshot: those placed
        after the preemption was decided go with the gang as well."""
        self.store = store
        self.placed = placed
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
        records = await self.store.pending(tidy=True)
        if not records:
            return []
        snapshot = await self.snapshot()
        now = time.time() * 1000
        evicted: list[str] = []
        fields: dict[str, list[str]] = {}  # gang -> its records' fields
        for eviction, _until in records:
            fields.setdefault(eviction.gang, []).append(eviction.field)
        for eviction, until in records:
            if eviction.gang in evicted:
                continue
            left = eviction.left(snapshot)
            if left is None:
                if now > until:
                    log.info(
                        "gang %s: kube-scheduler did not take it below its minimum on node %s; nothing more evicted",
                        eviction.gang,
                        eviction.node,
                    )
                    await self.store.done(eviction.field)
                continue
            if self.placed is not None:  # members placed since the preemption was decided go as well
                known = {uid for uid, _ in left} | set(eviction.trigger)
                since = self.placed(snapshot, eviction.gang)
                left += [m for m in since if m[0] not in known and not _gone(snapshot, m[0])]
            await self._evict(eviction, left, snapshot)
            await self.store.done(*fields[eviction.gang])
            evicted.append(eviction.gang)
        return evicted

    async def _evict(self, eviction: GangEviction, left: Sequence[PodRef], snapshot: Snapshot) -> None:
        message = (
            f"preempted with its gang {eviction.gang}, which goes whole: its members on node {eviction.node} "
            f"were preempted by pod {eviction.preemptor}"
        )
        gone = 0
        for uid, ref in left:
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


def _answers(raw: Mapping[Any, Any]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for node, value in raw.items():
        try:
            out[_text(node)] = _uids(orjson.loads(value))
        except (orjson.JSONDecodeError, TypeError):
            continue
    return out


def _uids(raw: Sequence[Any]) -> frozenset[str]:
    return frozenset(_text(u) for u in raw)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _deadline(raw: Any) -> int:
    """A stored deadline in epoch ms; 0 (ended) when unreadable."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


def _gone(snapshot: Snapshot, uid: str) -> bool:
    pod = snapshot.find_pod(uid)
    return pod is None or is_leaving(pod)
