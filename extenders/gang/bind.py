"""The bind verb for every pod: ``BindService``.

A plain pod is bound at once by extenders.binding's ``Binder``; a gang member goes through the
gang's Permit (``GangPermit``), which holds its call until the gang can go.

binds = BindService(gangs, policy)
await binds.start()                                      # pub/sub: wakes held calls (and requeues)
error = await binds.bind(ns, name, uid, node, gone)      # "" = bound
await binds.stop()
"""

from __future__ import annotations

import asyncio

from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait
from extenders.binding.binder import Binder, BindTarget, FitCheck, Resolved, capacity_fit, policy_fit
from extenders.gang import reasons
from extenders.gang.membership import gang_ref, names_a_gang
from extenders.gang.permit import GangPermit
from extenders.gang.service import GangService
from extenders.gang.waiters import GangEvents, Waiters
from extenders.kube.events import ObjectRef
from extenders.logs import log_fields
from extenders.policy import Policy
from extenders.snapshot import Snapshot


class BindService:
    """A plain pod is validated, reserved and bound at once; a gang member is held (GangPermit)."""

    def __init__(
        self,
        gangs: GangService,
        policy: Policy | None = None,
        *,
        fit: FitCheck | None = None,
        snapshot_max_age: float = 0.0,
    ) -> None:
        """``snapshot_max_age``: seconds a plain pod's bind may check it on this replica's last read of the
        snapshot (0: every bind reads Redis after it arrived; see ``_resolve``)."""
        config = gangs.config
        self.snapshot_max_age = snapshot_max_age
        self.gangs = gangs
        self.runtime = gangs.runtime
        if fit is None:
            fit = policy_fit(policy) if policy is not None else capacity_fit
        self.binder = Binder(
            self.runtime,
            fit,
            assumed_ttl_seconds=config.assumed_ttl_seconds,
            cas_retries=config.cas_retries,
            api_concurrency=config.api_bind_concurrency,
            victims_of=gangs.evictions.victims_for,
            victim_wait_seconds=config.victim_wait_seconds,
        )
        self.waiters = Waiters(gangs.store, config)
        nudger = gangs.nudger
        self.events = GangEvents(
            gangs.redis,
            gangs.store.channel,
            self.waiters,
            gangs.store.nudge_channel,
            nudger.wake if nudger is not None else None,
        )
        self.permit = GangPermit(self.binder, gangs.store, self.waiters, config, gangs.replica_id, gangs.index)
        self.runtime.telemetry.held_binds.set_function(self.waiters.held_count)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.events.run(), name="gang-pubsub"))

    async def stop(self) -> None:
        # cancel_and_wait re-cancels: redis-py can swallow a cancellation (Python 3.11's wait_for).
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()
        await self.waiters.stop()

    async def bind(self, namespace: str, name: str, uid: str, node: str, gone: asyncio.Event | None = None) -> str:
        """The bind verb: "" on success, else the text for the answer's ``Error``. ``gone``: set
        when the caller stops waiting (see GangPermit.bind)."""
        target = BindTarget(namespace, name, uid, node)
        try:
            snapshot, resolved = await self._resolve(target)
        except (RedisError, OSError) as exc:
            return f"cannot bind {target.key}: cluster snapshot unavailable (Redis: {exc})"
        ref = None
        if not (resolved.error or resolved.pod is None or resolved.bound_to):
            ref = gang_ref(resolved.pod, snapshot.podgroups, self.gangs.config)
        if ref is not None and ref.is_gang:
            assert resolved.pod is not None
            with log_fields(gang=ref.key):
                try:
                    going = await self.gangs.evictions.going_whole(ref.key, snapshot)
                except (RedisError, OSError) as exc:
                    return f"cannot bind {target.key}: gang state unavailable (Redis: {exc})"
                if going is not None:  # its filter passed before kube-scheduler took the trigger
                    return f"gang {ref.key} is being preempted whole for {going.preemptor}: {target.key} is not bound"
                return await self.permit.bind(target, resolved.pod, ref, gone)  # notes its own Events
        error = await self.binder.bind(target, resolved, snapshot)
        if error:
            pod = ObjectRef.pod(target.namespace, target.name, target.uid)
            self.runtime.events.record(pod, reasons.TYPES[reasons.BIND_FAILED], reasons.BIND_FAILED, error)
        return error

    async def _resolve(self, target: BindTarget) -> tuple[Snapshot, Resolved]:
        """The pod the call names, found on this replica's last read when that began at most
        ``snapshot_max_age`` ago, else on a read made after the call arrived.

        The reservation is a compare-and-set on the node's generation: a read that missed a change of
        the node is refused there, and the fit is checked again on a fresh one. The last read is taken
        only for a pod it shows pending and placed nowhere, outside any gang (the gang's rules count its
        members as they are now, and a recent read may not have its PodGroup yet).
        """
        held = self.runtime.held_snapshot(self.snapshot_max_age)
        if held is not None:
            pod = self.binder.pending_pod(target, held)
            if pod is not None and not names_a_gang(pod, self.gangs.config):
                self.runtime.telemetry.bind_snapshots.labels("held").inc()
                return held, Resolved(pod)
        self.runtime.telemetry.bind_snapshots.labels("read").inc()
        snapshot = await self.runtime.snapshot()
        return snapshot, await self.binder.resolve(target, snapshot)
