"""Gang rules for the verbs other than bind: ``GangService``.

gangs = GangService(redis, runtime, GangConfig(...))
await gangs.start()                                    # upkeep sweep + requeue of parked members
verdict = await gangs.filter(pod, snapshot, passing)   # after the predicates
await gangs.gang_status(ns, name) / await gangs.list_gangs()
await gangs.stop()

Binding members (holding their calls until the gang can go) is ``extenders.gang.bind``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import redis.asyncio as aredis
from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait, every
from extenders.binding.binder import BindRuntime
from extenders.gang import reasons
from extenders.gang.config import GangConfig
from extenders.gang.eviction import EvictionStore, GangEvictor
from extenders.gang.filter import GangVerdict, capacity_shortfall, lower_than
from extenders.gang.gates import AssemblyGates
from extenders.gang.journal import ADMITTED, PERMITTED, REJECTED, RELEASED, VANISHED, Decision, GangJournal
from extenders.gang.membership import GangIndexCache, GangMembers, GangOf, gang_of_for, gang_ref, order_score
from extenders.gang.nudger import Nudger
from extenders.gang.podgroup_status import PodGroupStatusWriter
from extenders.gang.reconcile import GangReconciler
from extenders.gang.state import FilterState, FilterStatus, GangStore, Seen
from extenders.gang.status import STATES, gang_document
from extenders.kube.events import ObjectRef
from extenders.kube.requeue import PodRef, Requeuer
from extenders.logs import FailureLog
from extenders.model import PodInfo
from extenders.snapshot import Snapshot

log = logging.getLogger(__name__)

_DECISION_REASONS = {
    ADMITTED: reasons.GANG_ADMITTED,
    PERMITTED: reasons.GANG_PERMITTED,
    REJECTED: reasons.GANG_REJECTED,
    RELEASED: reasons.GANG_RELEASED,
}


class GangService:
    """Filter's gang check, parked members and their requeue, upkeep, status documents."""

    def __init__(
        self,
        redis: aredis.Redis,
        runtime: BindRuntime,
        config: GangConfig | None = None,
        *,
        replica_id: str | None = None,
    ) -> None:
        self.config = config or GangConfig()
        self.runtime = runtime
        self.redis = redis
        self.replica_id = replica_id or str(getattr(runtime, "replica_id", "") or "replica")
        self.store = GangStore(redis, runtime.store.prefix, self.config)
        self.index = GangIndexCache(self.config)
        kube = runtime.kube
        self.nudger = (
            Nudger(self.store, Requeuer(kube, runtime.telemetry.requeues), self.config.sweep_interval_seconds)
            if kube is not None
            else None
        )
        self.journal = GangJournal(redis, runtime.store.prefix, self._report)
        self.reconciler = GangReconciler(self.store, runtime.snapshot, self.index, self.config.sweep_interval_seconds)
        self.evictions = EvictionStore(redis, runtime.store.prefix)
        self.evictor = (
            GangEvictor(self.evictions, kube, runtime.snapshot, runtime.events, runtime.telemetry, placed=self._placed)
            if kube is not None
            else None
        )
        self.podgroup_status = (
            PodGroupStatusWriter(
                kube, runtime.snapshot, self._members, self.gang_states, self.config.podgroup_label, runtime.telemetry
            )
            if kube is not None
            else None
        )
        self.gates = (
            AssemblyGates(kube, runtime.snapshot, self.index, runtime.telemetry.gates_removed, runtime.events)
            if kube is not None
            else None
        )
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._sweep_loop(), name="gang-sweep"))
        if self.nudger is not None:
            self._tasks.append(asyncio.create_task(self.nudger.run(), name="gang-nudger"))

    def leader_work(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """What the watch leader runs for gangs: bookkeeping that follows the pods, the rest of the
        gangs preempted whole, reporting decisions, PodGroup status, and the assembly gate."""
        if self.podgroup_status is None or self.evictor is None or self.gates is None:
            return []
        return [self.reconciler.run, self.evictor.run, self.journal.run, self.podgroup_status.run, self.gates.run]

    async def stop(self) -> None:
        # cancel_and_wait re-cancels: redis-py can swallow a cancellation (Python 3.11's wait_for).
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()

    async def _sweep_loop(self) -> None:
        await every(
            self.config.sweep_interval_seconds, self._sweep, FailureLog(log, "gang sweep"), (RedisError, OSError)
        )

    async def _sweep(self) -> None:
        removed = await self.store.sweep()
        if removed:
            log.info("removed idle gang bookkeeping: %s", ", ".join(removed[:10]))

    # --- filter --------------------------------------------------------------------------------

    async def filter(self, pod: PodInfo, snapshot: Snapshot, passing: list[str]) -> GangVerdict | None:
        """None for pods outside any gang; else whether the member may pass (with the reason if not),
        noted as an Event on the pod (written in the background)."""
        verdict = await self._filter(pod, snapshot, passing)
        if verdict is not None and verdict.event:
            message = verdict.reason or f"gang {verdict.gang} is admitted to assemble: this member may be placed"
            self.runtime.events.record(
                ObjectRef.pod(pod.namespace, pod.name, pod.uid), reasons.TYPES[verdict.event], verdict.event, message
            )
        return verdict

    async def _filter(self, pod: PodInfo, snapshot: Snapshot, passing: list[str]) -> GangVerdict | None:
        """The gang check itself.

        The capacity check runs only while the gang is not admitted: once it assembles, kube-scheduler
        has assumed members whose bind calls may not have reached us yet, so what the gang still needs
        cannot be told from here, and kube-scheduler's own filters see those members anyway.
        """
        ref = gang_ref(pod, snapshot.podgroups, self.config)
        if ref is None or not ref.is_gang:
            return None
        members = self.index.get(snapshot).members(ref.key)
        seen: Seen = (snapshot.generation, True)
        if all(p.uid != pod.uid for p in members.all()):
            # The watch has not written this pod yet: it is a member all the same.
            members = GangMembers(ref.key, [*members.pending, pod], members.held, members.bound)
            seen = (snapshot.generation, False)
        minimum, me = ref.min_member, (pod.uid, pod.key)
        try:
            going = await self.evictions.going_whole(ref.key, snapshot)
        except (RedisError, OSError) as exc:
            return GangVerdict(ref.key, False, f"gang {ref.key}: gang state unavailable (Redis: {exc})")
        if going is not None:
            # Placed now, the member would be all that is left of its gang once the evictor has run.
            return GangVerdict(
                ref.key,
                False,
                f"gang {ref.key} is being preempted whole for {going.preemptor}: its members are not placed",
                unresolvable=True,
                event=reasons.GANG_WAITING,
            )
        if minimum is None:
            # Parked, so that the minimum's arrival (its PodGroup created) requeues it.
            with contextlib.suppress(RedisError, OSError):
                await self.store.park(ref.key, me, seen)
            return GangVerdict(ref.key, False, ref.error, event=reasons.GANG_INVALID)
        try:
            if members.count < minimum:
                state = await self.store.filter(ref.key, False, 0, minimum, me, seen)
                if state.status is FilterStatus.COOLING:
                    return self._cooling(ref.key, state)
                return GangVerdict(
                    ref.key,
                    False,
                    f"gang {ref.key}: only {members.count} of the {minimum} required members exist "
                    f"({len(members.pending)} pending, {len(members.held)} held at bind, {len(members.bound)} bound)",
                    event=reasons.GANG_WAITING,
                )
            state = await self.store.check(ref.key, me, seen)
            reason = ""
            if state.status is FilterStatus.CHECK:
                reason = capacity_shortfall(ref.key, members, minimum, snapshot, passing, pod)
                state = await self.store.filter(
                    ref.key, not reason, order_score(ref, members), minimum, me, seen, members.priority()
                )
        except (RedisError, OSError) as exc:
            return GangVerdict(ref.key, False, f"gang {ref.key}: gang state unavailable (Redis: {exc})")
        if state.status is FilterStatus.COOLING:
            return self._cooling(ref.key, state)
        if state.status is FilterStatus.ADMITTED:
            return GangVerdict(ref.key, True, event=reasons.GANG_ADMITTED)
        if state.status is FilterStatus.PERMITTED:
            return GangVerdict(ref.key, True)
        if reason:
            # Room that lower-priority pods hold is room a preemption can make: let kube-scheduler try.
            evictable = lower_than(members.priority())
            nodes = list(snapshot.nodes)
            resolvable = not capacity_shortfall(ref.key, members, minimum, snapshot, nodes, pod, evictable)
            return GangVerdict(ref.key, False, reason, unresolvable=not resolvable, event=reasons.GANG_WAITING)
        assembling = ", ".join(state.assembling) or "none"
        return GangVerdict(
            ref.key,
            False,
            f"gang {ref.key} is waiting to be admitted: position {state.position} in the queue, "
            f"assembling now: {assembling} (at most {self.config.max_assembling} at once)",
            event=reasons.GANG_WAITING,
        )

    @staticmethod
    def _cooling(gang: str, state: FilterState) -> GangVerdict:
        return GangVerdict(
            gang,
            False,
            f"{state.why}; cooling down for {max(state.ms_left, 0) / 1000:.1f}s more",
            event=reasons.GANG_COOLING_DOWN,
        )

    async def release_orphan(self, pod: PodInfo, snapshot: Snapshot) -> bool:
        """True when ``pod`` was held at bind in ``snapshot`` and that reservation was dropped.

        kube-scheduler filters a pod only when it no longer assumes it anywhere, so a reservation
        of the pod's own is left from a bind call that was abandoned; filtering against it would
        count the pod twice (its resources, its spread and affinity terms).
        """
        ref = gang_ref(pod, snapshot.podgroups, self.config)
        if ref is None or not ref.is_gang:
            return False
        if all(p.uid != pod.uid for p in self.index.get(snapshot).members(ref.key).held):
            return False
        released = await self.store.release_orphan(ref.key, pod.uid)
        if released:
            log.info("gang %s: %s is being scheduled again: dropped its orphaned reservation", ref.key, pod.key)
        return released

    async def park(self, pod: PodInfo, snapshot: Snapshot) -> None:
        """Remember a gang member that failed the node predicates everywhere, so it is requeued
        when its gang's reservations change (see extenders.kube.requeue)."""
        ref = gang_ref(pod, snapshot.podgroups, self.config)
        if ref is not None and ref.is_gang:
            members = self.index.get(snapshot).members(ref.key)
            seen = (snapshot.generation, any(p.uid == pod.uid for p in members.all()))
            await self.store.park(ref.key, (pod.uid, pod.key), seen)

    def gang_of(self, snapshot: Snapshot) -> GangOf:
        """The ``gang_of`` callable for ``extenders.preemption`` (same label keys as here)."""
        return gang_of_for(snapshot, self.config)

    # --- reporting (the watch leader) ----------------------------------------------------------

    async def _report(self, decision: Decision) -> None:
        """A decision from the journal: metrics, an Event on the PodGroup, its status refreshed."""
        telemetry = self.runtime.telemetry
        if decision.kind == ADMITTED:
            telemetry.gang_admissions.inc()
            message = f"gang {decision.gang} is admitted to assemble: its members may be placed and are held at bind"
        elif decision.kind == PERMITTED:
            telemetry.gang_decisions.labels(PERMITTED).inc()
            if decision.since_admission_seconds is not None:
                telemetry.gang_time_to_permit.observe(decision.since_admission_seconds)
            message = f"gang {decision.gang} is permitted: its minimum of members is placed and they bind now"
        elif decision.kind == REJECTED:
            telemetry.gang_decisions.labels(REJECTED).inc()
            cool = (decision.cool_ms or 0) / 1000
            message = f"{decision.why}; its reservations were released; cooling down for {cool:.1f}s"
        elif decision.kind == RELEASED:
            telemetry.gang_decisions.labels(RELEASED).inc()
            message = f"{decision.why}: its held members, slot and queue place were released"
        elif decision.kind == VANISHED:
            telemetry.gang_decisions.labels(VANISHED).inc()
            if self.podgroup_status is not None:
                self.podgroup_status.wake()
            return
        else:
            return
        if decision.kind in (PERMITTED, REJECTED) and decision.window_seconds is not None:
            telemetry.gang_window.labels(decision.kind).observe(decision.window_seconds)
        if self.podgroup_status is not None:
            if decision.kind == ADMITTED:
                self.podgroup_status.admitted(decision.gang, decision.at_ms)
            else:
                self.podgroup_status.wake()
        group = (await self.runtime.snapshot()).podgroups.get(decision.gang)
        if group is not None:
            reason = _DECISION_REASONS[decision.kind]
            ref = ObjectRef.podgroup(group.namespace, group.name, group.uid)
            self.runtime.events.record(ref, reasons.TYPES[reason], reason, message)

    def _members(self, snapshot: Snapshot, gang: str) -> GangMembers:
        return self.index.get(snapshot).members(gang)

    def _placed(self, snapshot: Snapshot, gang: str) -> list[PodRef]:
        members = self._members(snapshot, gang)
        return [(p.uid, p.key) for p in (*members.bound, *members.held)]

    async def gang_states(self, gangs: list[str]) -> dict[str, str]:
        """Each gang's state as ``GET /v1/gangs`` reports it (waiting, assembling, permitted, ...)."""
        now, records = await self.store.read(gangs)
        return {r.key: gang_document(r.key, r, None, None, now)["state"] for r in records}

    async def sample_metrics(self) -> None:
        """Refresh the gauges read from Redis (gangs by state), when metrics are scraped."""
        counts = dict.fromkeys(STATES, 0)
        for doc in await self.list_gangs():
            counts[doc["state"]] = counts.get(doc["state"], 0) + 1
        for state, count in counts.items():
            self.runtime.telemetry.gangs.labels(state).set(count)

    # --- status --------------------------------------------------------------------------------

    async def gang_status(self, namespace: str, name: str) -> dict[str, Any] | None:
        """One gang's document, or None when neither Redis nor the snapshot knows it."""
        key = f"{namespace}/{name}"
        snapshot = await self.runtime.snapshot()
        index = self.index.get(snapshot)
        now, records = await self.store.read([key])
        record = records[0] if records and (records[0].fields or records[0].arrivals) else None
        if record is None and key not in index.gangs:
            return None
        return gang_document(key, record, index.gangs.get(key), index.ref(key), now)

    async def list_gangs(self) -> list[dict[str, Any]]:
        snapshot = await self.runtime.snapshot()
        index = self.index.get(snapshot)
        now, records = await self.store.read()
        by_key = {r.key: r for r in records}
        keys = sorted(set(by_key) | set(index.gangs))
        return [gang_document(k, by_key.get(k), index.gangs.get(k), index.ref(k), now) for k in keys]
