"""PodGroup ``status``, kept by the watch leader as scheduler-plugins' controller keeps it.

Phase and counts come from the group's pods as the API server has them (a label-selected list,
made only when the snapshot shows a member or the gang's state changed) and from the gang's
state in Redis; the status subresource is patched only when the result differs from what this
leader last wrote.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from redis.exceptions import RedisError

from extenders.aio import cancelling, wait_event
from extenders.gang.membership import GangMembers
from extenders.kube.client import KubeApiError, KubeClient, rfc3339
from extenders.model import PodGroupInfo
from extenders.snapshot import Snapshot
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

PENDING = "Pending"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"

# Gang states (``extenders.gang.status``) in which the group is being placed.
_PLACING = frozenset({"assembling", "permitted"})


def podgroup_status(min_member: int, pods: Iterable[Mapping[str, Any]], gang_state: str) -> dict[str, Any]:
    """Phase and counts of a group from its pods' objects and its gang state."""
    scheduled = running = succeeded = failed = 0
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        phase = (pod.get("status") or {}).get("phase") or ""
        if (pod.get("spec") or {}).get("nodeName"):
            scheduled += 1
        running += phase == "Running"
        succeeded += phase == "Succeeded"
        failed += phase == "Failed"
    minimum = max(min_member, 1)
    if succeeded >= minimum:
        phase = FINISHED
    elif failed and running + succeeded < minimum:
        phase = FAILED
    elif running + succeeded >= minimum:
        phase = RUNNING
    elif scheduled >= minimum:
        phase = SCHEDULED
    elif scheduled or gang_state in _PLACING:
        phase = SCHEDULING
    else:
        phase = PENDING
    return {"phase": phase, "scheduled": scheduled, "running": running, "succeeded": succeeded, "failed": failed}


# The part of a gang's snapshot that, when it changes, may change its status. A reservation of ours
# counts as placed in the snapshot before the API server has the Binding: its confirmation by the
# watch (``assumed`` turning False) is what says the pod list now shows it bound.
Signature = tuple[str, tuple[tuple[str, str, str, bool], ...]]


def signature(members: GangMembers, gang_state: str) -> Signature:
    return gang_state, tuple(sorted((p.uid, p.node_name, p.phase, p.assumed) for p in members.all()))


class PodGroupStatusWriter:
    """The leader's loop: recompute changed groups every ``interval`` (or at once when woken)."""

    def __init__(
        self,
        kube: KubeClient,
        snapshot: Callable[[], Awaitable[Snapshot]],
        members: Callable[[Snapshot, str], GangMembers],
        gang_states: Callable[[list[str]], Awaitable[dict[str, str]]],
        member_label: str,
        telemetry: Telemetry | None = None,
        interval: float = 2.0,
    ) -> None:
        self.kube = kube
        self.snapshot = snapshot
        self.members = members
        self.gang_states = gang_states
        self.member_label = member_label
        self.telemetry = telemetry or Telemetry()
        self.interval = interval
        self._seen: dict[str, Signature] = {}
        self._written: dict[str, dict[str, Any]] = {}
        self._started: dict[str, int] = {}  # gang -> when it was first admitted (ms), for scheduleStartTime
        self._wake = asyncio.Event()

    def admitted(self, gang: str, at_ms: int) -> None:
        """A gang got its assembling slot: its status is due now, with its start time."""
        self._started.setdefault(gang, at_ms)
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        delay = self.interval
        while True:
            await wait_event(self._wake, delay)
            try:
                await self.sync()
                delay = self.interval
            except (RedisError, OSError, httpx.HTTPError, KubeApiError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                delay = min(delay * 2, 30.0)
                log.warning("PodGroup status update failed (%s); retrying in %.0fs", exc, delay)

    async def sync(self) -> int:
        """Write the status of every group whose members or gang state changed; returns how many."""
        snap = await self.snapshot()
        groups: dict[str, PodGroupInfo] = dict(snap.podgroups)
        # Admissions of gangs without a PodGroup are dropped here too: the leader would keep one
        # entry for every gang it ever saw admitted.
        for gone in [k for k in self._seen.keys() | self._started.keys() if k not in groups]:
            self._seen.pop(gone, None)
            self._written.pop(gone, None)
            self._started.pop(gone, None)
        if not groups:
            return 0
        states = await self.gang_states(list(groups))
        written = 0
        for key, group in groups.items():
            state = states.get(key, "waiting")
            sig = signature(self.members(snap, key), state)
            if self._seen.get(key) == sig:
                continue
            if await self._write(group, state):
                written += 1
            self._seen[key] = sig
        return written

    async def _write(self, group: PodGroupInfo, state: str) -> bool:
        selector = quote(f"{self.member_label}={group.name}", safe="=/")
        path = f"/api/v1/namespaces/{quote(group.namespace)}/pods?labelSelector={selector}"
        pods = (await self.kube.list(path)).items
        status = podgroup_status(group.min_member, pods, state)
        started = self._started.get(group.key)
        if started is not None:
            status["scheduleStartTime"] = rfc3339(started / 1000)
        if self._written.get(group.key) == status:
            return False
        if not await self.kube.patch_podgroup_status(group.namespace, group.name, status):
            self.telemetry.podgroup_status_updates.labels("gone").inc()
            return False
        self.telemetry.podgroup_status_updates.labels("written").inc()
        self._written[group.key] = status
        return True
