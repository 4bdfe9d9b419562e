"""The bind verb for a single pod: re-validate, reserve, create the Binding.

kube-scheduler's own cache does not count what only this extender counts (extended resources
it ignores, other replicas' recent binds), so bind checks the pod against the current shared
snapshot once more and reserves it there with a compare-and-set on the node's generation:
of two replicas racing for the last unit, exactly one reserves it, the other answers an error
and kube-scheduler retries that pod. The reservation (an assumed pod) is visible to every
replica's next filter at once; the watch confirms it, a refused API binding forgets it, and one that
got no answer keeps it (the API server may still create it) until the watch confirms it or it expires.
A preemptor refused only because its own preemption's victims are still in the snapshot waits a
little for the watch to show them gone: kube-scheduler binds it as soon as its informer does.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx
from redis.exceptions import RedisError

from extenders import engine
from extenders.aio import poll_until
from extenders.kube.client import BindResult, BindStatus, KubeApiError, KubeClient
from extenders.kube.events import EventRecorder
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import SKIP, Verdict
from extenders.plugins.registry import CAPACITY_FILTERS, FILTERS
from extenders.policy import Policy
from extenders.quantity import QuantityError
from extenders.snapshot import Snapshot
from extenders.sync.convert import pod_info
from extenders.sync.store import AssumeStatus, Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

# Failing verdicts of the predicates for ``pod`` on ``node`` (empty: it fits).
FitCheck = Callable[[PodInfo, NodeInfo, Snapshot], list[Verdict]]
# The victims recent preempt answers offered a pod (by its uid), by node.
VictimsOf = Callable[[str], Awaitable[Mapping[str, frozenset[str]]]]
# How long a bind refused for its own preemption's victims waits for the snapshot to see them go.
VICTIM_WAIT_SECONDS = 5.0
VICTIM_POLL_SECONDS = 0.05


def policy_fit(policy: Policy) -> FitCheck:
    """Every predicate of the policy, through the engine's single-node check."""

    def _fit(pod: PodInfo, node: NodeInfo, snapshot: Snapshot) -> list[Verdict]:
        return engine.fits(policy, pod, node, snapshot)

    return _fit


def capacity_fit(pod: PodInfo, node: NodeInfo, snapshot: Snapshot) -> list[Verdict]:
    """Only what concurrent binds change: resources (extended ones included) and host ports."""
    failures: list[Verdict] = []
    for name in CAPACITY_FILTERS:
        plugin = FILTERS[name]
        state = plugin.prepare(pod, snapshot)
        if state is SKIP:
            continue
        verdict = plugin.check(pod, node, state)
        if not verdict.fit:
            failures.append(verdict)
    return failures


class BindRuntime(Protocol):
    """What bind needs of ``extenders.runtime.ClusterRuntime``."""

    store: Store
    kube: KubeClient | None
    telemetry: Telemetry
    events: EventRecorder

    async def snapshot(self) -> Snapshot: ...

    def held_snapshot(self, max_age: float) -> Snapshot | None:
        """The last snapshot read, when that read began at most ``max_age`` seconds ago."""
        ...


@dataclass(slots=True, frozen=True)
class BindTarget:
    """The four fields of kube-scheduler's ExtenderBindingArgs."""

    namespace: str
    name: str
    uid: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Resolved:
    """The pod a bind call names, or why it cannot be bound (``error``), or that it already is."""

    pod: PodInfo | None = None
    error: str = ""
    bound_to: str = ""  # the node the pod is already bound to (per the API or the watch)


@dataclass(slots=True)
class Check:
    """A fit check against one snapshot: the node generation a reservation must still match."""

    snapshot: Snapshot
    generation: int = 0
    error: str = ""
    bound_here: bool = False  # the watch already shows the pod bound to this node
    unfit: bool = False  # the error is the fit check's


def _reasons(verdicts: list[Verdict]) -> str:
    return engine.combine(verdicts).reason if verdicts else ""


class Binder:
    """Plain (non-gang) binds, and the validate/reserve/API steps the gang coordinator reuses."""

    LOCKS = 64

    def __init__(
        self,
        runtime: BindRuntime,
        fit: FitCheck = capacity_fit,
        *,
        assumed_ttl_seconds: float = 60.0,
        cas_retries: int = 8,
        api_concurrency: int = 8,
        victims_of: VictimsOf | None = None,
        victim_wait_seconds: float = VICTIM_WAIT_SECONDS,
    ) -> None:
        """``victims_of``: the victims of a pod's own recent preemptions (see ``await_own_victims``)."""
        self.runtime = runtime
        self.fit = fit
        self.victims_of = victims_of
        self.victim_wait_seconds = victim_wait_seconds
        self.assumed_ttl_seconds = assumed_ttl_seconds
        self.cas_retries = cas_retries
        # A released gang binds all its members at once; a few requests at a time over kept-alive
        # connections finish sooner than hundreds racing for connections (and spare the API server).
        self._api_slots = asyncio.Semaphore(api_concurrency)
        # Binds to one node from this replica take turns, so they never lose CAS races to each other.
        self._locks = [asyncio.Lock() for _ in range(self.LOCKS)]

    def node_lock(self, node: str) -> asyncio.Lock:
        return self._locks[zlib.crc32(node.encode()) % self.LOCKS]

    # --- steps ---------------------------------------------------------------------------------

    async def resolve(self, target: BindTarget, snapshot: Snapshot) -> Resolved:
        """Find the pod: pending in the snapshot by uid, placed by us earlier, else from the API."""
        pod = snapshot.pending.get(target.uid) if target.uid else None
        placed = snapshot.find_pod(target.uid) if target.uid else None
        if placed is not None:
            if not placed.assumed and placed.node_name:
                return Resolved(placed, bound_to=placed.node_name)
            if placed.node_name != target.node and self.runtime.kube is not None:
                # Reserved elsewhere: maybe a bind that already happened there. Ask the API before
                # moving the reservation, so a stray retry cannot un-count a real binding.
                return await self._fetch(target)
            pod = pod or placed
        if pod is None and not target.uid:
            pod = next(
                (p for p in snapshot.pending.values() if p.namespace == target.namespace and p.name == target.name),
                None,
            )
        if pod is not None:
            if pod.namespace != target.namespace or pod.name != target.name:
                return Resolved(error=f"pod uid {target.uid} belongs to {pod.key}, not {target.key}")
            return Resolved(pod)
        return await self._fetch(target)

    @staticmethod
    def pending_pod(target: BindTarget, snapshot: Snapshot) -> PodInfo | None:
        """The pod when ``snapshot`` shows it pending under the uid and name the call gives, and placed
        nowhere; None for every other case (``resolve`` on a fresh read decides those)."""
        pod = snapshot.pending.get(target.uid) if target.uid else None
        if pod is None or pod.namespace != target.namespace or pod.name != target.name:
            return None
        return None if snapshot.find_pod(target.uid) is not None else pod

    async def _fetch(self, target: BindTarget) -> Resolved:
        kube = self.runtime.kube
        if kube is None:
            return Resolved(
                error=f"pod {target.key} is not in the extender's snapshot and no Kubernetes API is configured"
            )
        try:
            obj = await kube.get_pod(target.namespace, target.name)
        except (KubeApiError, httpx.HTTPError) as exc:
            return Resolved(error=f"reading pod {target.key} failed: {exc}")
        if obj is None:
            return Resolved(error=f"pod {target.key} not found (deleted?)")
        try:
            pod = pod_info(obj)
        except (QuantityError, ValueError, TypeError) as exc:
            return Resolved(error=f"pod {target.key}: {exc}")
        if target.uid and pod.uid != target.uid:
            return Resolved(error=f"pod {target.key} now has uid {pod.uid}, not {target.uid} (recreated?)")
        if pod.node_name:
            return Resolved(pod, bound_to=pod.node_name)
        return Resolved(pod)

    def check(self, pod: PodInfo, node: str, snapshot: Snapshot) -> Check:
        """Whether ``pod`` fits ``node`` in ``snapshot`` right now (its own reservation not counted)."""
        info = snapshot.node(node)
        if info is None or info.node is None:
            return Check(snapshot, error=f"node {node} is not in the extender's snapshot")
        current = info.pods.get(pod.uid)
        if current is not None and not current.assumed:
            return Check(snapshot, info.generation, bound_here=True)
        target = info if current is None else engine.without_pods(info, {pod.uid})
        failures = self.fit(pod, target, snapshot)
        if failures:
            error = f"pod {pod.key} no longer fits node {node}: {_reasons(failures)}"
            return Check(snapshot, info.generation, error=error, unfit=True)
        return Check(snapshot, info.generation)

    @property
    def attempts(self) -> int:
        """Fit check + reservation attempts per call: ``cas_retries``, but always at least one."""
        return max(1, self.cas_retries)

    async def reserve(self, pod: PodInfo, node: str, ttl: float, snapshot: Snapshot | None = None) -> Check:
        """Validate and reserve atomically (CAS on the node generation, re-validating on a race).

        ``snapshot``: one the caller read during this call, tried first. The CAS refuses it if the
        node changed since, and a refusal of the fit is looked at again on a fresh snapshot, so it
        only spares a catch-up round trip when it is still current. A refusal owed only to the
        victims of the pod's own preemption is tried again once they are seen gone."""
        checked = await self._reserve(pod, node, ttl, snapshot)
        if checked.unfit:
            gone = await self.await_own_victims(pod, node, checked.snapshot)
            if gone is not None:
                if gone:
                    checked = await self._reserve(pod, node, ttl, None)
                outcome = "bound" if gone and not checked.error else "refused"
                self.runtime.telemetry.preemptor_retries.labels(outcome).inc()
        return checked

    async def await_own_victims(self, pod: PodInfo, node: str, snapshot: Snapshot) -> bool | None:
        """Whether victims that the pod's own preemption offered on ``node``, the only pods in its
        way there in ``snapshot``, were seen gone within ``victim_wait_seconds``; None when there are
        no such victims to wait for. kube-scheduler binds a preemptor once its informer sees them go,
        which can be before this snapshot does."""
        info = snapshot.node(node)
        if self.victims_of is None or self.victim_wait_seconds <= 0 or not pod.uid or info is None:
            return None
        try:
            victims = (await self.victims_of(pod.uid)).get(node, frozenset()) & info.pods.keys()
        except (RedisError, OSError) as exc:
            log.debug("could not read the victims of %s's preemption: %s", pod.key, exc)
            return None
        if not victims or self.fit(pod, engine.without_pods(info, {*victims, pod.uid}), snapshot):
            return None
        log.info("bind of %s waits for its preemption's victims on %s to go: %s", pod.key, node, sorted(victims))

        async def gone() -> bool | None:
            current = (await self.runtime.snapshot()).node(node)
            return True if current is None or not victims & current.pods.keys() else None

        return bool(await poll_until(gone, self.victim_wait_seconds, VICTIM_POLL_SECONDS))

    async def _reserve(self, pod: PodInfo, node: str, ttl: float, snapshot: Snapshot | None) -> Check:
        async with self.node_lock(node):
            for attempt in range(self.attempts):
                tried = self.check(pod, node, snapshot) if snapshot is not None and attempt == 0 else None
                # None to try, or a refusal perhaps only stale: look at a fresh snapshot.
                checked = (
                    tried
                    if tried is not None and not tried.error
                    else self.check(pod, node, await self.runtime.snapshot())
                )
                if checked.error or checked.bound_here:
                    return checked
                result = await self.runtime.store.assume_pod(pod, node, checked.generation, ttl)
                if result.ok:
                    checked.generation = result.generation
                    return checked
                if result.status is AssumeStatus.ALREADY_BOUND:
                    if result.node == node:
                        checked.bound_here = True
                        return checked
                    checked.error = f"pod {pod.key} is already bound to node {result.node}"
                    return checked
                # CONFLICT: the node changed since the check; look again.
            checked.error = f"node {node} kept changing while reserving {pod.key}; try again"
            return checked

    async def api_bind(self, pod: PodInfo, node: str) -> BindResult:
        """Create the Binding, at most ``api_concurrency`` at once. A call that queued for a slot
        longer than a third of the reservation TTL pushes its reservation out first, and does not
        bind when the reservation is gone (expired: the capacity may be someone else's by now)."""
        kube = self.runtime.kube
        if kube is None:
            return BindResult(BindStatus.ERROR, "no Kubernetes API is configured: cannot create the Binding")
        loop = asyncio.get_running_loop()
        queued = loop.time()
        async with self._api_slots:
            if loop.time() - queued > self.assumed_ttl_seconds / 3:
                try:
                    kept = await self.runtime.store.touch_assumed(pod.uid, self.assumed_ttl_seconds)
                except (RedisError, OSError) as exc:
                    log.warning("could not extend the reservation of %s before binding: %s", pod.key, exc)
                    kept = True  # unknown: it was valid a moment ago; bind rather than drop a gang member
                if not kept:
                    return BindResult(
                        BindStatus.ERROR,
                        f"the reservation of {pod.key} on {node} expired while waiting for an API slot; "
                        "not binding on capacity that may be taken",
                    )
            refused = await self._unreplicated(pod, node)
            if refused is not None:
                return refused
            return await kube.bind_pod(pod.namespace, pod.name, pod.uid, node)

    async def _unreplicated(self, pod: PodInfo, node: str) -> BindResult | None:
        """An error when the reservation may not survive a Redis failover (fewer replicas than asked
        for hold it): a binding made on it could be counted by nobody after the failover."""
        store = self.runtime.store
        try:
            acked = await store.replicated()
        except (RedisError, OSError) as exc:
            return BindResult(BindStatus.ERROR, f"cannot confirm the reservation of {pod.key} on Redis replicas: {exc}")
        if acked is None or acked >= store.min_replicas_ack:
            return None
        return BindResult(
            BindStatus.ERROR,
            f"the reservation of {pod.key} on {node} reached {acked} of the {store.min_replicas_ack} Redis "
            f"replicas asked for within {store.ack_timeout:g}s; not binding on a reservation a failover could lose",
        )

    @staticmethod
    def bind_error(pod: PodInfo, node: str, result: BindResult) -> str:
        """The bind verb's Error text for a failed API binding ("" when it succeeded)."""
        if result.ok:
            return ""
        if result.status is BindStatus.BOUND_ELSEWHERE:
            return f"pod {pod.key} is already bound to node {result.node}"
        if result.status is BindStatus.NOT_FOUND:
            return f"pod {pod.key} not found (deleted?): {result.message}"
        if result.status is BindStatus.UID_MISMATCH:
            return f"pod {pod.key} was replaced: {result.message}"
        if result.uncertain:
            return (
                f"binding pod {pod.key} to node {node} got no answer from the API server "
                f"({result.message}); the reservation is kept until the watch shows the pod or it expires"
            )
        return f"binding pod {pod.key} to node {node} failed: {result.message}"

    # --- the verb ------------------------------------------------------------------------------

    async def bind(self, target: BindTarget, resolved: Resolved | None = None, snapshot: Snapshot | None = None) -> str:
        """Bind one pod; returns the Error text ("" on success). Retries of a done bind succeed.
        ``snapshot``: the one ``resolved`` was found in, read during this call."""
        try:
            if resolved is None:
                snapshot = await self.runtime.snapshot()
                resolved = await self.resolve(target, snapshot)
            if resolved.error or resolved.pod is None:
                return resolved.error or f"pod {target.key} not found"
            if resolved.bound_to:
                if resolved.bound_to == target.node:
                    return ""
                return f"pod {target.key} is already bound to node {resolved.bound_to}"
            pod = resolved.pod
            checked = await self.reserve(pod, target.node, self.assumed_ttl_seconds, snapshot)
        except (RedisError, OSError) as exc:
            return f"cannot reserve {target.key} on {target.node}: Redis unavailable ({exc})"
        if checked.error:
            return checked.error
        if checked.bound_here:
            return ""
        result = await self.api_bind(pod, target.node)
        if result.ok:
            return ""
        if result.uncertain:
            # The API server may still create the Binding: the reservation stays, so the capacity is
            # not handed out twice before the watch sees the pod; if it never is, the reservation expires.
            log.warning("binding %s to %s has no answer; its reservation is kept: %s", pod.key, target.node, result)
            return self.bind_error(pod, target.node, result)
        try:
            await self.runtime.store.forget_pod(pod.uid, target.node)
        except (RedisError, OSError) as exc:  # the reservation then expires with its TTL
            log.warning("could not forget the reservation of %s after a failed bind: %s", pod.key, exc)
        return self.bind_error(pod, target.node, result)
