"""Glue between the wire types and the engine: parse, fetch the snapshot, run, shape the answer.

Kept free of FastAPI so the routes stay one-liners and the logic is testable on its own.
Domain failures (snapshot unavailable, pod cannot be placed) come back through the
protocol's ``Error`` field; only malformed input raises ``BadRequest``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from typing import Any

from redis.exceptions import RedisError

from app.kube_types import Node, Pod
from app.wire import ExplainArgs, ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs
from extenders import engine
from extenders.binding.service import BindService
from extenders.equivalence import ClassMemo, EquivalenceCache
from extenders.equivalence.shared import SharedTier
from extenders.gang import GangService
from extenders.kube.requeue import REFUSAL_WINDOW_SECONDS, REQUEUE_INTERVAL_SECONDS, Requeuer
from extenders.logs import log_fields
from extenders.model import NodeFacts, PodInfo
from extenders.policy import Policy
from extenders.preemption import process_preemption, to_wire
from extenders.quantity import QuantityError
from extenders.runtime import ClusterRuntime
from extenders.snapshot import Snapshot
from extenders.sync import convert

log = logging.getLogger(__name__)


# kube-scheduler filters and scores a pod in one cycle, on one snapshot of its own. Prioritize soon after
# this replica filtered the same pod reads the snapshot that filter read: the scores then describe
# the cluster the verdicts did, and the call costs no Redis round trip. When the pod comes with the
# resourceVersion it was filtered with (the API changes it with every write), the filter's view of
# it and its class are taken too, instead of being derived again. With ``prioritize_ahead`` the
# scores of the nodes that passed are computed as soon as the filter has answered, while
# kube-scheduler runs its own score plug-ins (it calls prioritize only after them): a prioritize
# for those very nodes then only takes them. Same pod, snapshot and nodes: the same answer.
CYCLE_SNAPSHOT_SECONDS = 1.0
CYCLES_KEPT = 256


@dataclasses.dataclass(slots=True, eq=False)
class _Cycle:
    """What a filter leaves for its pod's prioritize call on this replica."""

    at: float  # time.monotonic() of the filter
    snapshot: Snapshot
    resource_version: str  # the pod's, as the filter got it ("" when it had none)
    pod: PodInfo
    class_key: str | None  # the pod's equivalence class (None: the cache is off)
    names: list[str] | None = None  # the nodes ``scores`` was computed for, ahead of the call
    scores: list[dict[str, Any]] | None = None  # prioritize's answer for ``names``


class BadRequest(Exception):
    """The request is well-formed JSON of the right shape but says something impossible."""


class SnapshotUnavailable(Exception):
    """Redis (and so the shared snapshot) cannot be read right now."""


def pod_info(pod: Pod) -> PodInfo:
    """The scheduling view of a wire pod; bad quantities are the caller's fault (4xx)."""
    try:
        return convert.pod_info(pod.as_json())
    except (QuantityError, ValueError, TypeError) as exc:
        raise BadRequest(f"Pod: {exc}") from exc


def node_json(node: Node) -> dict[str, Any]:
    """A request's node object as it came in (only the fields that were sent, every one of them)."""
    return node.model_dump(exclude_unset=True)


def candidate_names(args: ExtenderArgs) -> list[str]:
    if args.NodeNames is not None:
        return list(args.NodeNames)
    if args.Nodes is not None:
        return [item.metadata.name for item in args.Nodes.items]
    return []


class Scheduler:
    """Answers the extender verbs for one replica, over the shared snapshot."""

    def __init__(
        self,
        runtime: ClusterRuntime,
        policy: Policy,
        gangs: GangService,
        binds: BindService,
        equivalence: EquivalenceCache | None = None,
        shared: SharedTier | None = None,
        prioritize_ahead: bool = True,
    ) -> None:
        """``shared``: the equivalence cache's tier in Redis (None: this replica's memory only);
        ``prioritize_ahead``: score the passing nodes once a filter has answered (see ``_Cycle``)."""
        self.runtime = runtime
        self.prioritize_ahead = prioritize_ahead
        self.policy = policy
        self.equivalence = equivalence or EquivalenceCache()
        self.shared = shared if shared is not None and shared.enabled else None
        self.gangs = gangs
        self.binds = binds
        self.requeuer = Requeuer(runtime.kube) if runtime.kube is not None else None
        self._requeues: set[asyncio.Task[int]] = set()
        self._cycles: OrderedDict[str, _Cycle] = OrderedDict()  # pod uid -> what its filter left

    def _filtered(self, raw: Pod, pod: PodInfo, snap: Snapshot, class_key: str | None) -> _Cycle:
        """Remember what a pod was filtered on, for its prioritize call in the same cycle."""
        cycles = self._cycles
        now = time.monotonic()
        cycles.pop(pod.uid, None)
        entry = cycles[pod.uid] = _Cycle(now, snap, raw.metadata.resourceVersion or "", pod, class_key)
        while cycles and (len(cycles) > CYCLES_KEPT or next(iter(cycles.values())).at < now - CYCLE_SNAPSHOT_SECONDS):
            cycles.popitem(last=False)
        return entry

    def _cycle(self, raw: Pod) -> _Cycle | None:
        """What this pod's filter here left, if within the cycle's time."""
        uid = raw.metadata.uid
        entry = self._cycles.pop(uid, None) if uid else None
        if entry is None or entry.at < time.monotonic() - CYCLE_SNAPSHOT_SECONDS:
            return None
        self.runtime.telemetry.cycle_snapshots.inc()
        return entry

    async def snapshot(self, node_objects: list[Node] | None = None) -> Snapshot:
        """The current snapshot; full node objects in the request refresh older records first."""
        try:
            if node_objects:
                await self._refresh_nodes(node_objects)
            return await self.runtime.snapshot()
        except (RedisError, OSError) as exc:
            raise SnapshotUnavailable(f"cluster snapshot unavailable (Redis: {exc})") from exc

    async def _refresh_nodes(self, node_objects: list[Node]) -> None:
        """Write node facts the request knows better; a node this replica already has unchanged costs no I/O."""
        known = self.runtime.cache.current.nodes
        changed: list[NodeFacts] = []
        for item in node_objects:
            try:
                facts = convert.node_facts(item.model_dump(exclude_none=True))
            except (QuantityError, ValueError, TypeError) as exc:
                raise BadRequest(f"Nodes.items[{item.metadata.name}]: {exc}") from exc
            info = known.get(facts.name)
            # resourceVersion alone changes on every kubelet heartbeat; it is not worth a write.
            if facts.name and (
                info is None
                or info.node is None
                or dataclasses.replace(info.node, resource_version=facts.resource_version) != facts
            ):
                changed.append(facts)
        if changed:
            # Bounded, so a request with thousands of changed nodes cannot take every pooled connection.
            limit = asyncio.Semaphore(16)

            async def refresh(facts: NodeFacts) -> None:
                async with limit:
                    await self.runtime.store.refresh_node_if_newer(facts)

            await asyncio.gather(*(refresh(f) for f in changed))

    async def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        pod = pod_info(args.Pod)
        with log_fields(verb="filter", pod=pod.key):
            names = candidate_names(args)
            items = args.Nodes.items if args.NodeNames is None and args.Nodes is not None else None
            try:
                snap = await self.snapshot(items)
                if await self.gangs.release_orphan(pod, snap):
                    snap = await self.snapshot()
            except SnapshotUnavailable as exc:
                return self._filter_answer(args, [], {}, {}, str(exc))
            except (RedisError, OSError) as exc:
                return self._filter_answer(args, [], {}, {}, f"gang state unavailable (Redis: {exc})")
            memo = self.equivalence.memo(pod, "filter")
            if memo is not None and self.shared is not None:
                await self.shared.prepare(memo, "filter", names)
            try:
                view = engine.without_own_reservation(snap, pod, names)
                result = engine.filter_nodes(self.policy, pod, view, names, memo)
            except Exception as exc:  # a bug must fail this pod's cycle, not the HTTP request
                log.exception("filter failed for %s", pod.key)
                return self._filter_answer(args, [], {}, {}, f"internal error evaluating {pod.key}: {exc!r}")
            if memo is not None:
                self.equivalence.count("filter", result.reused, result.computed, result.shared)
                if self.shared is not None:
                    self.shared.collect(memo)
            if result.passing:
                try:
                    verdict = await self.gangs.filter(pod, snap, result.passing)
                except (RedisError, OSError) as exc:
                    return self._filter_answer(args, [], {}, {}, f"gang state unavailable (Redis: {exc})")
                if verdict is not None and not verdict.fit:
                    (result.unresolvable if verdict.unresolvable else result.failed).update(
                        verdict.failed_nodes(result.passing)
                    )
                    result.passing = []
            elif names:
                await self._refused(pod, snap)
            if result.passing:
                entry = self._filtered(args.Pod, pod, snap, memo.key if memo is not None else None)
                if self.prioritize_ahead and items is None and len(result.passing) > 1:
                    # Runs once this call has returned and its answer is written (nothing awaits in between).
                    asyncio.get_running_loop().call_soon(self._score_ahead, entry, list(result.passing))
            return self._filter_answer(args, result.passing, result.failed, result.unresolvable, "")

    async def _refused(self, pod: PodInfo, snap: Snapshot) -> None:
        """Remember a pod refused on every node, so it is requeued in kube-scheduler if the verdict
        came from a snapshot behind what kube-scheduler had already seen (see extenders.kube.requeue)."""
        try:
            await self.gangs.park(pod, snap)
            stale = await self.runtime.store.record_refusal(
                pod.uid, pod.key, snap.generation, REFUSAL_WINDOW_SECONDS, REQUEUE_INTERVAL_SECONDS
            )
        except (RedisError, OSError) as exc:  # the answer stands; only a later requeue is lost
            log.warning("could not record the refusal of %s: %s", pod.key, exc)
            return
        if stale and self.requeuer is not None:
            task = asyncio.create_task(self.requeuer.requeue([(pod.uid, pod.key)], "refused on a stale snapshot"))
            self._requeues.add(task)
            task.add_done_callback(self._requeues.discard)

    @staticmethod
    def _filter_answer(
        args: ExtenderArgs, passing: list[str], failed: dict[str, str], unresolvable: dict[str, str], error: str
    ) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }
        if args.NodeNames is None and args.Nodes is not None:
            keep = set(passing)
            # Echo the very objects that came in, in request order.
            items = [node_json(i) for i in args.Nodes.items if i.metadata.name in keep]
            answer["Nodes"] = {"metadata": {}, "items": items}
        else:
            answer["NodeNames"] = passing
        return answer

    def _score_ahead(self, cycle: _Cycle, names: list[str]) -> None:
        """Prioritize's answer for the nodes a pod's filter passed, kept for its call (``_Cycle``)."""
        pod = cycle.pod
        if self._cycles.get(pod.uid) is not cycle:  # asked for already, dropped, or filtered again since
            return
        with log_fields(verb="prioritize", pod=pod.key):
            memo = self.equivalence.memo(pod, "prioritize", cycle.class_key)
            cycle.scores = self._score(pod, cycle.snapshot, names, memo)
        cycle.names = names
        self.runtime.telemetry.prioritize_ahead.labels("computed").inc()

    def _score(self, pod: PodInfo, snap: Snapshot, names: list[str], memo: ClassMemo | None) -> list[dict[str, Any]]:
        """Prioritize's answer; a failure is logged and answers neutral scores."""
        try:
            counts = engine.ScoreCounts()
            view = engine.without_own_reservation(snap, pod, names)
            scores = engine.prioritize_scores(self.policy, pod, view, names, memo, counts)
        except Exception:  # kube-scheduler ignores prioritize failures: neutral scores say the same
            log.exception("prioritize failed for %s", pod.key)
            scores = {}
        else:
            if memo is not None:
                self.equivalence.count("prioritize", counts.reused, counts.computed, counts.shared)
                if self.shared is not None:
                    self.shared.collect(memo)
        score = scores.get
        return [{"Host": n, "Score": score(n, 0)} for n in names]

    async def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        items = args.Nodes.items if args.NodeNames is None and args.Nodes is not None else None
        # Node objects in the request may be newer than the filter's snapshot: those refresh.
        cycle = self._cycle(args.Pod) if items is None else None
        rv = args.Pod.metadata.resourceVersion
        same = cycle if cycle is not None and rv and rv == cycle.resource_version else None  # the same pod
        names = candidate_names(args)
        if same is not None and same.scores is not None and same.names == names:
            self.runtime.telemetry.prioritize_ahead.labels("used").inc()
            return same.scores
        pod = same.pod if same is not None else pod_info(args.Pod)
        with log_fields(verb="prioritize", pod=pod.key):
            try:
                snap = cycle.snapshot if cycle is not None else await self.snapshot(items)
            except SnapshotUnavailable:
                # kube-scheduler ignores prioritize errors; neutral scores keep it going.
                log.warning("prioritize answered neutral scores: snapshot unavailable")
                return [{"Host": n, "Score": 0} for n in names]
            memo = self.equivalence.memo(pod, "prioritize", same.class_key if same is not None else None)
            if memo is not None and self.shared is not None:
                await self.shared.prepare(memo, "prioritize", names)
            return self._score(pod, snap, names, memo)

    async def preempt(self, args: ExtenderPreemptionArgs) -> dict[str, Any]:
        """Re-check kube-scheduler's candidates against what only we know (PDBs, gangs, managed resources)."""
        pod = pod_info(args.Pod)
        with log_fields(verb="preempt", pod=pod.key):
            candidates: dict[str, list[str]] = {}
            victim_pods: dict[str, PodInfo] | None = None
            if args.NodeNameToMetaVictims is not None:
                candidates = {n: [p.UID for p in m.Pods] for n, m in args.NodeNameToMetaVictims.items()}
            elif args.NodeNameToVictims is not None:
                victim_pods = {}
                for node, victims in args.NodeNameToVictims.items():
                    infos = [pod_info(p) for p in victims.Pods]
                    candidates[node] = [i.uid for i in infos]
                    victim_pods.update({i.uid: i for i in infos})
            try:
                snap = await self.snapshot()
            except SnapshotUnavailable:
                # No snapshot, no vouching for any candidate: kube-scheduler preempts nothing this cycle.
                log.warning("preempt answered no candidates: snapshot unavailable")
                return {"NodeNameToMetaVictims": {}}
            gang_of = self.gangs.gang_of(snap)
            try:
                result = process_preemption(
                    self.policy, pod, candidates, snap, gang_of=gang_of, victim_pods=victim_pods
                )
            except Exception:  # no answer we can vouch for: preempt nothing this cycle
                log.exception("preempt failed for %s", pod.key)
                return {"NodeNameToMetaVictims": {}}
            if result.gang_evictions:
                try:
                    await self.gangs.evictions.record(result.gang_evictions)
                except (RedisError, OSError) as exc:
                    # Unrecorded, the gang's members elsewhere would stay: that gang would be left half alive.
                    log.warning("preempt %s: no candidate: its gang eviction was not recorded (%s)", pod.key, exc)
                    return {"NodeNameToMetaVictims": {}}
            return to_wire(result.nodes)

    async def explain(self, args: ExplainArgs) -> dict[str, Any]:
        pod = pod_info(args.Pod)
        with log_fields(verb="explain", pod=pod.key):
            snap = await self.snapshot()
            names = list(args.NodeNames) if args.NodeNames is not None else None
            try:
                view = engine.without_own_reservation(snap, pod, snap.nodes if names is None else names)
                return engine.explain(self.policy, pod, view, names)
            except Exception as exc:
                log.exception("explain failed for %s", pod.key)
                raise BadRequest(f"cannot evaluate {pod.key}: {exc!r}") from exc

    async def bind(self, args: ExtenderBindingArgs, gone: asyncio.Event | None = None) -> dict[str, Any]:
        """``gone`` is set when the caller disconnects (a held gang member then withdraws)."""
        try:
            with log_fields(verb="bind", pod=f"{args.PodNamespace}/{args.PodName}", node=args.Node):
                error = await self.binds.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node, gone)
            return {"Error": error}
        except (RedisError, OSError, TimeoutError) as exc:
            # Nothing was bound: the binding is created only after the reservation in Redis succeeded.
            log.warning("bind of %s/%s failed: Redis unavailable: %s", args.PodNamespace, args.PodName, exc)
            return {"Error": f"bind failed: shared state unavailable (Redis: {exc}); nothing was bound"}
        except Exception as exc:  # the Error field sends the pod back to the queue; a 500 would too, less clearly
            log.exception("bind of %s/%s failed", args.PodNamespace, args.PodName)
            return {"Error": f"bind of {args.PodNamespace}/{args.PodName} failed: internal error {exc!r}"}
