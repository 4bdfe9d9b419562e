"""Gang binding (coscheduling's Permit): hold each member's bind call until the gang can go.

A member's call validates its fit, then one Lua script admits it, reserves its node (CAS on
the node's generation, as plain bind does) and records its arrival with a lease. Calls are
held until bound + arrived members reach the minimum; then every held call, on whichever
replica holds it, binds its own pod. When the window closes first, the script that notices
releases every reservation of the gang and every held call answers an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets

from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait
from extenders.binding.binder import Binder, BindTarget
from extenders.gang import reasons
from extenders.gang.config import GangConfig
from extenders.gang.membership import GangIndexCache, GangRef, order_score
from extenders.gang.state import ArriveResult, ArriveStatus, GangStore
from extenders.gang.waiters import DoneBatcher, Outcome, Waiters, WaitResult
from extenders.kube.events import ObjectRef
from extenders.model import PodInfo

log = logging.getLogger(__name__)


class GangPermit:
    """Holds gang members' bind calls until their gang can go, then lets each bind its pod."""

    def __init__(
        self,
        binder: Binder,
        store: GangStore,
        waiters: Waiters,
        config: GangConfig,
        replica_id: str,
        index: GangIndexCache | None = None,
    ) -> None:
        self.binder = binder
        self.store = store
        self.waiters = waiters
        self.config = config
        self.replica_id = replica_id
        self.index = index or GangIndexCache(config)
        self.finished = DoneBatcher(store)
        self.events = binder.runtime.events

    def _note(self, pod: PodInfo, reason: str, message: str) -> None:
        self.events.record(ObjectRef.pod(pod.namespace, pod.name, pod.uid), reasons.TYPES[reason], reason, message)

    async def _arrive(self, target: BindTarget, pod: PodInfo, ref: GangRef, token: str) -> ArriveResult | str:
        """Validate and arrive; re-validates when the node changed in between (CAS conflict)."""
        assert ref.min_member is not None
        window = ref.window_seconds or self.config.window_seconds
        binder = self.binder
        async with binder.node_lock(target.node):
            for _attempt in range(binder.attempts):
                snapshot = await binder.runtime.snapshot()
                checked = binder.check(pod, target.node, snapshot)
                if checked.error:
                    return checked.error
                if checked.bound_here:
                    return ""
                members = self.index.get(snapshot).members(ref.key)
                result = await self.store.arrive(
                    ref.key,
                    pod,
                    target.node,
                    checked.generation,
                    token=token,
                    replica=self.replica_id,
                    window_seconds=window,
                    minimum=ref.min_member,
                    score=order_score(ref, members),
                    priority=max(members.priority(), pod.priority),
                    placed_uids=members.placed_uids(),
                )
                if result.status is not ArriveStatus.CONFLICT:
                    return result
        return f"node {target.node} kept changing while reserving {pod.key}; try again"

    async def bind(self, target: BindTarget, pod: PodInfo, ref: GangRef, gone: asyncio.Event | None = None) -> str:
        """Bind one gang member; returns the Error text ("" on success). ``gone`` is set when the
        caller stops waiting (kube-scheduler's ``httpTimeout`` passed): a held arrival is then
        withdrawn, unless the gang was permitted meanwhile."""
        if ref.min_member is None:
            self._note(pod, reasons.GANG_INVALID, ref.error)
            return ref.error
        token = secrets.token_hex(8)
        try:
            arrived = await self._arrive(target, pod, ref, token)
        except (RedisError, OSError) as exc:
            return f"gang {ref.key}: cannot record the arrival of {pod.key} (Redis: {exc})"
        if isinstance(arrived, str):
            if arrived:
                self._note(pod, reasons.BIND_FAILED, arrived)
            return arrived
        status = arrived.status
        if arrived.replaced:
            # kube-scheduler sent another bind for the pod while one was still recorded (it gave up on
            # that call): the earlier call, if still held, answers that its arrival is gone.
            log.info("gang %s: bind call %s for %s replaced call %s", ref.key, token, pod.key, arrived.replaced)
        if status is ArriveStatus.REJECTED:
            why = f"{arrived.why}; cooling down for {max(arrived.ms_left, 0) / 1000:.1f}s more"
            self._note(pod, reasons.GANG_COOLING_DOWN, why)
            return why
        if status is ArriveStatus.NOT_ADMITTED:
            assembling = ", ".join(arrived.assembling) or "none"
            why = (
                f"gang {ref.key} is not admitted to assemble yet: position {arrived.position} in the queue, "
                f"assembling now: {assembling} (at most {self.config.max_assembling} at once)"
            )
            self._note(pod, reasons.GANG_WAITING, why)
            return why
        if status is ArriveStatus.BOUND:
            return "" if arrived.node == target.node else f"pod {pod.key} is already bound to node {arrived.node}"
        if status is ArriveStatus.PERMITTED:
            self.waiters.wake(ref.key)
            return await self._bind_permitted(target, pod, ref, token)
        return await self._hold(target, pod, ref, token, arrived, gone)

    async def _hold(
        self,
        target: BindTarget,
        pod: PodInfo,
        ref: GangRef,
        token: str,
        arrived: ArriveResult,
        gone: asyncio.Event | None = None,
    ) -> str:
        log.debug(
            "gang %s: %s held on %s by call %s (%d held, %d bound of %d)",
            ref.key,
            pod.key,
            target.node,
            token,
            arrived.held,
            arrived.bound,
            ref.min_member,
        )
        timeout = arrived.ms_left / 1000 + 2 * self.config.arrival_lease_seconds + 1.0
        try:
            waited = await self._wait(ref.key, pod.uid, token, timeout, gone)
        except asyncio.CancelledError:
            # The call is going away (shutdown): withdraw, so nothing stays reserved. A gang
            # permitted meanwhile keeps the arrival: kube-scheduler's retry of this pod binds it.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.store.withdraw(ref.key, pod.uid, token))
            raise
        if waited is None:
            return await self._caller_gone(target, pod, ref, token)
        if waited.outcome is Outcome.PERMITTED:
            return await self._bind_permitted(target, pod, ref, token)
        if waited.outcome is Outcome.REJECTED:
            why = f"{waited.why}; cooling down for {max(waited.cool_ms, 0) / 1000:.1f}s"
            self._note(pod, reasons.GANG_REJECTED, why)
            return why
        self._note(pod, reasons.BIND_FAILED, waited.why)
        log.info(
            "gang %s: held bind call %s for %s ended %s: %s", ref.key, token, pod.key, waited.outcome.value, waited.why
        )
        # Bounded like the wait: a hung Redis must not hold the answer (the reservation then
        # lapses with its hold TTL).
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await asyncio.wait_for(
                self.store.done(ref.key, pod.uid, token, bound=False), timeout=self.config.arrival_lease_seconds
            )
        return waited.why

    async def _wait(
        self, gang: str, uid: str, token: str, timeout: float, gone: asyncio.Event | None
    ) -> WaitResult | None:
        """The gang's decision, or None when ``gone`` is set first."""
        if gone is None:
            return await self.waiters.wait(gang, uid, token, timeout)
        decision = asyncio.ensure_future(self.waiters.wait(gang, uid, token, timeout))
        left = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait((decision, left), return_when=asyncio.FIRST_COMPLETED)
        finally:
            left.cancel()
            if not decision.done():
                await cancel_and_wait(decision)
        if decision.cancelled():
            return None
        return decision.result()  # decided, even if the caller left in the same moment

    async def _caller_gone(self, target: BindTarget, pod: PodInfo, ref: GangRef, token: str) -> str:
        """The caller stopped waiting while held: take the arrival back, so its capacity does not
        stay reserved for an answer nobody reads and kube-scheduler's retry starts clean."""
        try:
            withdrawn = await asyncio.wait_for(
                self.store.withdraw(ref.key, pod.uid, token), timeout=self.config.arrival_lease_seconds
            )
        except (RedisError, OSError, TimeoutError) as exc:
            # No longer refreshed, the arrival lapses with its lease and releases its reservation.
            log.warning("gang %s: withdrawing %s failed (%s); its lease lapses instead", ref.key, pod.key, exc)
            return f"gang {ref.key}: the caller stopped waiting for {pod.key}; its arrival lapses with its lease"
        if not withdrawn:
            # Permitted in the meantime: all-or-nothing needs this member bound all the same.
            return await self._bind_permitted(target, pod, ref, token)
        log.info("gang %s: %s withdrawn: the caller stopped waiting (bind httpTimeout?)", ref.key, pod.key)
        return f"gang {ref.key}: the caller stopped waiting for {pod.key}; its arrival was withdrawn"

    async def _bind_permitted(self, target: BindTarget, pod: PodInfo, ref: GangRef, token: str) -> str:
        result = await self.binder.api_bind(pod, target.node)
        # A Binding that got no answer may still be created: its reservation stays, as a plain pod's
        # does, until the watch shows the pod or the reservation expires (kube-scheduler's retry of
        # the pod finds the gang permitted and binds it, or learns it is bound).
        kept = result.ok or result.uncertain
        if result.uncertain:
            log.warning("gang %s: binding %s has no answer; its reservation is kept: %s", ref.key, pod.key, result)
        try:
            await self.finished.done(ref.key, pod.uid, token, kept)
        except (RedisError, OSError) as exc:
            # Bound: the watch confirms the reservation anyway. Not bound: it lapses with the lease.
            log.warning("gang %s: recording the outcome for %s failed: %s", ref.key, pod.key, exc)
        error = self.binder.bind_error(pod, target.node, result)
        if error:
            self._note(pod, reasons.BIND_FAILED, error)
        else:
            self._note(pod, reasons.GANG_PERMITTED, f"gang {ref.key} is permitted: bound to node {target.node}")
        return error
