"""The preempt verb: kube-scheduler's candidates re-checked on the snapshot, after a repeat of a
preemption it has already made is recognised and declined.

kube-scheduler (asynchronous preemption, 1.33 on) retries a preemptor as soon as any pod goes; if its
cache still holds the victims it evicted, it runs the same preemption again. That one deletes
nothing, so it emits no deletion event, and the preemptor can stay parked in kube-scheduler's
queue until some unrelated pod is deleted, or the queue is flushed (five minutes). Declining the
repeat leaves the preemptor parked as plainly unschedulable, and the victims' deletion, which its
cache has yet to see, moves it on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from redis.exceptions import RedisError

from extenders.aio import poll_until
from extenders.gang import GangService
from extenders.model import PodInfo
from extenders.policy import Policy
from extenders.preemption import MetaVictims, process_preemption
from extenders.preemption.inflight import repeated_preemption, with_leaving
from extenders.scheduling.outcomes import SnapshotUnavailable
from extenders.snapshot import Snapshot
from extenders.telemetry import Telemetry

log = logging.getLogger("extenders.preemption")

# How long a repeat on the nominated node waits for the snapshot to see its victims go. kube-scheduler
# waits for the answer (its cycle is blocked), so this is short: the watch is milliseconds behind.
REPEAT_WAIT_SECONDS = 0.25
REPEAT_POLL_SECONDS = 0.02


class Preempter:
    """The preempt verb for one replica."""

    def __init__(
        self, policy: Policy, gangs: GangService, snapshot: Callable[[], Awaitable[Snapshot]], telemetry: Telemetry
    ) -> None:
        """``snapshot``: the current snapshot (raises ``SnapshotUnavailable`` when it cannot be read)."""
        self.policy = policy
        self.gangs = gangs
        self.snapshot = snapshot
        self.telemetry = telemetry

    async def preempt(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo] | None
    ) -> dict[str, MetaVictims]:
        snap = await self.snapshot()
        try:
            # Victims of answers just given may not be gone from the snapshot yet: kube-scheduler
            # evicts asynchronously, and another preemptor's cycle may come first.
            evicting, offered, answered = await self.gangs.evictions.preempting(pod.uid)
        except (RedisError, OSError) as exc:
            log.warning("preempt answered no candidates: Redis unavailable (%s)", exc)
            return {}
        try:
            repeat = repeated_preemption(pod, candidates, answered, snap)
            if repeat is not None and repeat.live:
                snap = await self._await_victims(pod, candidates, answered) or await self.snapshot()
                repeat = repeated_preemption(pod, candidates, answered, snap)
        except SnapshotUnavailable:
            raise
        except Exception:  # not a repeat we can vouch for: decided as any other preemption
            log.exception("preempt %s: checking for a repeated preemption failed", pod.key)
            repeat = None
        if repeat is not None and not repeat.live:
            self.telemetry.preemptor_retries.labels("repeat_declined").inc()
            log.info(
                "preempt %s: no candidate: node %s repeats the preemption already made for it there (its "
                "victims are gone; kube-scheduler has not seen it yet and will retry the pod when it does)",
                pod.key,
                repeat.node,
            )
            return {}
        view = with_leaving(snap, evicting)
        gang_of = self.gangs.gang_of(view)
        try:
            result = process_preemption(
                self.policy, pod, candidates, view, gang_of=gang_of, victim_pods=victim_pods, departed=offered
            )
        except Exception:  # no answer we can vouch for: preempt nothing this cycle
            log.exception("preempt failed for %s", pod.key)
            return {}
        if result.freed:
            self.telemetry.preemptor_retries.labels("already_freed").inc()
        if result.gang_evictions or result.relied:
            try:
                await self.gangs.evictions.record(result.gang_evictions, result.relied)
            except (RedisError, OSError) as exc:
                # Unrecorded, the gang's members elsewhere would stay: that gang would be left half alive.
                log.warning("preempt %s: no candidate: its gang evictions were not recorded (%s)", pod.key, exc)
                return {}
        # Any answered victim may be evicted, and found missing when kube-scheduler retries with it
        # (see NodeSelector); with one node, kube-scheduler can only pick it.
        answer = {name: victims.uids for name, victims in result.nodes.items()}
        if any(answer.values()):
            try:
                await self.gangs.evictions.mark_preempting(answer, preemptor=pod.uid)
            except (RedisError, OSError) as exc:
                log.warning("preempt %s: its victims were not marked (%s)", pod.key, exc)
        return result.nodes

    async def _await_victims(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], answered: Mapping[str, frozenset[str]]
    ) -> Snapshot | None:
        """A repeat whose victims the snapshot still holds: kube-scheduler evicted them a moment ago,
        or its eviction failed. The first snapshot without them, if one comes within the wait."""

        async def settled() -> Snapshot | None:
            snap = await self.snapshot()
            repeat = repeated_preemption(pod, candidates, answered, snap)
            return snap if repeat is None or not repeat.live else None

        return await poll_until(settled, REPEAT_WAIT_SECONDS, REPEAT_POLL_SECONDS)
