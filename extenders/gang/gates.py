"""The gang assembly gate: members created gated reach kube-scheduler together.

kube-scheduler leaves a pod alone while it has a scheduling gate. A gang member created with
``ASSEMBLY_GATE`` (in its pod template) waits there, out of kube-scheduler's queue, until the watch
leader sees its gang with its minimum of live members and removes the gate from each member. Without
the gate, a member created before its siblings is filtered, refused (fewer live members than the
minimum) and backed off by kube-scheduler: on older releases (1.28 measured) that costs a small
gang one to two seconds. With it, members are first filtered when their gang is whole. A gated pod of no gang
(or of a native pod group, which kube-scheduler gangs itself) is let go at once; so is a member
whose gang's minimum cannot be told (its PodGroup missing, a bad label) once ``UNKNOWN_MINIMUM_SECONDS``
have passed since it was created, so that filter's refusal says what is wrong. A member left gated
because its gang is short gets one ``GangWaiting`` Event saying so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

import httpx
from prometheus_client import Counter
from redis.exceptions import RedisError

from extenders.aio import every
from extenders.gang.membership import GangIndex, GangIndexCache, gang_key, timestamp_ms
from extenders.gang.reasons import GANG_WAITING, TYPES
from extenders.kube.client import KubeApiError, KubeClient
from extenders.kube.events import EventRecorder, ObjectRef
from extenders.logs import FailureLog
from extenders.model import PodInfo
from extenders.snapshot import Snapshot

log = logging.getLogger(__name__)

ASSEMBLY_GATE = "kube-gang-extender/gang-assembly"
# How often the leader looks for gangs that became whole: the delay a gated gang waits at most,
# beside the watch's own lag. A look with nothing changed costs one Redis round trip.
POLL_SECONDS = 0.1
# A pod whose gate was just removed is not patched again until the watch shows the change, or this long.
RESEND_SECONDS = 5.0
CONCURRENT_PATCHES = 8
# A PodGroup is often created beside its pods, a little after them: its members wait this long for it.
UNKNOWN_MINIMUM_SECONDS = 10.0


# Why a pod is let through: the ``why`` label of extender_gang_gates_removed_total.
MEMBER = "member"
NO_GANG = "no_gang"
UNKNOWN_MINIMUM = "unknown_minimum"
# A member kept behind the gate: its gang is short of its minimum.
SHORT = "short"


def sort_gated(snapshot: Snapshot, index: GangIndex, now_ms: int) -> dict[tuple[str, str], list[PodInfo]]:
    """The pending, live pods gated by ``ASSEMBLY_GATE``, by (why, gang) (gang "" for pods of no gang).
    Let through: of no gang (``NO_GANG``), of a gang with at least its minimum of live members
    (``MEMBER``), of a gang whose minimum is still unknown ``UNKNOWN_MINIMUM_SECONDS`` after the pod's
    creation (``UNKNOWN_MINIMUM``). Kept: of a gang short of its minimum (``SHORT``); any other waits
    unsorted for its minimum to be known."""
    due: dict[tuple[str, str], list[PodInfo]] = defaultdict(list)
    for pod in snapshot.pending.values():
        if ASSEMBLY_GATE not in pod.scheduling_gates or pod.terminating or pod.terminal:
            continue
        key = gang_key(pod, index.config)
        ref = index.ref(key) if key is not None else None
        if key is None or ref is None:
            due[NO_GANG, ""].append(pod)
        elif ref.min_member is not None:
            due[MEMBER if index.members(key).count >= ref.min_member else SHORT, key].append(pod)
        else:
            created = timestamp_ms(pod.creation_timestamp)
            if created is None or now_ms - created >= UNKNOWN_MINIMUM_SECONDS * 1000:
                due[UNKNOWN_MINIMUM, key].append(pod)
    return due


class AssemblyGates:
    """The watch leader's side work: removes ``ASSEMBLY_GATE`` from the pods ``sort_gated`` lets
    through, and tells each member it keeps why, once."""

    def __init__(
        self,
        kube: KubeClient,
        snapshot: Callable[[], Awaitable[Snapshot]],
        index: GangIndexCache,
        counter: Counter | None = None,
        events: EventRecorder | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.kube = kube
        self.snapshot = snapshot
        self.index = index
        self.counter = counter  # extender_gang_gates_removed_total{why}
        self.events = events
        self.poll_seconds = poll_seconds
        self._sent: dict[str, float] = {}  # pod uid -> when its gate's removal was sent
        self._told: set[str] = set()  # uids of the members kept that got their Event
        self._slots = asyncio.Semaphore(CONCURRENT_PATCHES)

    async def run(self) -> None:
        await every(self.poll_seconds, self._look, FailureLog(log, "gang assembly gates"), (RedisError, OSError))

    async def _look(self) -> None:
        await self.release(await self.snapshot())

    async def release(self, snapshot: Snapshot) -> int:
        """Remove the gate from every releasable pod not sent already; returns how many were removed."""
        now = time.monotonic()
        self._sent = {uid: at for uid, at in self._sent.items() if now - at < RESEND_SECONDS}
        if not any(ASSEMBLY_GATE in p.scheduling_gates for p in snapshot.pending.values()):
            self._told.clear()
            return 0  # the common case: no gang index built for nothing
        index = self.index.get(snapshot)
        removed = 0
        kept: set[str] = set()
        for (why, gang), pods in sort_gated(snapshot, index, int(time.time() * 1000)).items():
            if why == SHORT:
                self._tell(gang, pods, index)
                kept.update(p.uid for p in pods)
                continue
            fresh = [p for p in pods if p.uid not in self._sent]
            if not fresh:
                continue
            for pod in fresh:
                self._sent[pod.uid] = now
            done = sum(await asyncio.gather(*(self._remove(pod) for pod in fresh)))
            removed += done
            if self.counter is not None and done:
                self.counter.labels(why).inc(done)
            if why == MEMBER:
                log.info("gang %s is whole: %d member(s) let through the assembly gate", gang, done)
            elif why == UNKNOWN_MINIMUM:
                log.info("gang %s: minimum still unknown, %d member(s) let through for filter to say why", gang, done)
            else:
                log.info("%d pod(s) of no gang let through the assembly gate", done)
        self._told &= kept
        return removed

    def _tell(self, gang: str, pods: list[PodInfo], index: GangIndex) -> None:
        """One ``GangWaiting`` Event on each kept member: a gated pod shows no other reason."""
        ref = index.ref(gang)
        assert ref is not None  # sort_gated keeps a member only when its gang's minimum is known
        message = (
            f"gang {gang}: only {index.members(gang).count} of the {ref.min_member} required "
            f"members exist; its members wait behind the scheduling gate {ASSEMBLY_GATE} until they do"
        )
        for pod in pods:
            if pod.uid not in self._told and self.events is not None:
                self._told.add(pod.uid)
                self.events.record(
                    ObjectRef.pod(pod.namespace, pod.name, pod.uid), TYPES[GANG_WAITING], GANG_WAITING, message
                )

    async def _remove(self, pod: PodInfo) -> bool:
        async with self._slots:
            try:
                removed = await self.kube.remove_scheduling_gate(
                    pod.namespace, pod.name, pod.uid, ASSEMBLY_GATE, pod.scheduling_gates.index(ASSEMBLY_GATE)
                )
            except (KubeApiError, httpx.HTTPError) as exc:
                log.warning("could not remove the assembly gate of %s: %s", pod.key, exc)
                removed = False
        if not removed:
            # Gone, replaced or its gates changed: looked at again once the watch has the pod as it is.
            self._sent[pod.uid] = time.monotonic() - RESEND_SECONDS + 1.0
        return removed
