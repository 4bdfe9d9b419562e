"""The extender verbs for one replica, over the shared snapshot: what each verb does, in domain terms.

The web layer parses requests into PodInfo and NodeFacts and builds the answers; here the verbs fetch
the snapshot, run the engine, the gang rules and preemption, and keep one scheduling cycle's work for
the next verb of the same pod (``extenders.scheduling.cycle``). Domain failures (snapshot unavailable,
an engine bug) come back as an outcome the protocol can carry; only ``Unevaluable`` and
``SnapshotUnavailable`` (for explain and the operator views) are raised.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

from redis.exceptions import RedisError

from extenders import engine
from extenders.equivalence import ClassMemo, EquivalenceCache
from extenders.equivalence.shared import SharedTier
from extenders.gang import BindService, GangService, names_a_gang
from extenders.kube.requeue import REFUSAL_KEEP_SECONDS, REQUEUE_INTERVAL_SECONDS, STALE_REFUSAL, Requeuer
from extenders.logs import log_fields
from extenders.model import NodeFacts, PodInfo
from extenders.policy import Policy
from extenders.preemption import MetaVictims
from extenders.preemption.inflight import fit_without_own_victims
from extenders.runtime import ClusterRuntime
from extenders.scheduling.cycle import Cycle, Cycles
from extenders.scheduling.outcomes import CyclePod, FilterOutcome, NodeScores, SnapshotUnavailable, Unevaluable
from extenders.scheduling.preempt import Preempter
from extenders.snapshot import Snapshot

log = logging.getLogger(__name__)


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
        shape_ahead: Callable[[NodeScores], Any] | None = None,
        snapshot_max_age: float = 0.0,
    ) -> None:
        """``shared``: the equivalence cache's tier in Redis (None: this replica's memory only);
        ``prioritize_ahead``: score the passing nodes once a filter has answered (see ``Cycle``);
        ``shape_ahead``: what the web layer makes of scores computed ahead, kept as their ``answer``;
        ``snapshot_max_age``: seconds a filter may answer on this replica's last read (0: every filter
        reads Redis after it arrived; see ``_held_snapshot``)."""
        self.runtime = runtime
        self.prioritize_ahead = prioritize_ahead
        self.snapshot_max_age = snapshot_max_age
        self.shape_ahead = shape_ahead
        self.policy = policy
        self.equivalence = equivalence or EquivalenceCache()
        self.shared = shared if shared is not None and shared.enabled else None
        self.gangs = gangs
        self.binds = binds
        self.requeuer = Requeuer(runtime.kube, runtime.telemetry.requeues) if runtime.kube is not None else None
        self._cycles = Cycles()
        self.preempter = Preempter(policy, gangs, self.snapshot, runtime.telemetry)

    async def snapshot(self, nodes: Sequence[NodeFacts] = ()) -> Snapshot:
        """The current snapshot; nodes a request carried whole refresh older records first."""
        try:
            if nodes:
                await self._refresh_nodes(nodes)
            return await self.runtime.snapshot()
        except (RedisError, OSError) as exc:
            raise SnapshotUnavailable(f"cluster snapshot unavailable (Redis: {exc})") from exc

    async def _refresh_nodes(self, nodes: Sequence[NodeFacts]) -> None:
        """Write node facts the request knows better; a node this replica already has unchanged costs no I/O."""
        known = self.runtime.cache.current.nodes
        changed: list[NodeFacts] = []
        for facts in nodes:
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

    async def filter(
        self, pod: PodInfo, resource_version: str, names: list[str], nodes: Sequence[NodeFacts] | None = None
    ) -> FilterOutcome:
        """The candidates ``names`` that fit ``pod``; ``nodes``: the candidates as whole objects, when
        the request carried them (their snapshot is then not the one prioritize-ahead may score)."""
        with log_fields(verb="filter", pod=pod.key):
            held = self._held_snapshot(pod, nodes)
            evaluated = await self._evaluate(pod, held, names) if held is not None else None
            if held is not None and isinstance(evaluated, tuple) and evaluated[1].passing:
                snap = held
                self.runtime.telemetry.filter_snapshots.labels("held").inc()
                asyncio.get_running_loop().call_soon(self.runtime.cache.refresh_soon, self.snapshot_max_age / 2)
            elif isinstance(evaluated, FilterOutcome):
                return evaluated
            else:
                # Refused everywhere on the held read, the pod would be parked: that is decided on a read
                # made after the call arrived, as is every filter when no read is recent enough.
                self.runtime.telemetry.filter_snapshots.labels("read" if evaluated is None else "held_refused").inc()
                try:
                    snap = await self.snapshot(nodes or ())
                    if await self.gangs.release_orphan(pod, snap):
                        snap = await self.snapshot()
                except SnapshotUnavailable as exc:
                    return FilterOutcome.failure(str(exc))
                except (RedisError, OSError) as exc:
                    return FilterOutcome.failure(f"gang state unavailable (Redis: {exc})")
                evaluated = await self._evaluate(pod, snap, names)
                if isinstance(evaluated, FilterOutcome):
                    return evaluated
            memo, result = evaluated
            return await self._conclude(pod, resource_version, names, nodes, snap, memo, result)

    def _held_snapshot(self, pod: PodInfo, nodes: Sequence[NodeFacts] | None) -> Snapshot | None:
        """The snapshot this replica read at most ``snapshot_max_age`` ago, when ``pod`` may be filtered on it.

        kube-scheduler filters on an informer cache a few milliseconds old, and bind re-validates every
        placement atomically in Redis, so a filter need not wait for a read of its own while this
        replica's last one is that recent. Under load it is: a filter answered on a read older than half
        the limit starts the next read once it has answered, so reads follow the limit, not the calls.
        Pods a gang label names (their PodGroup may be newer than the read), and requests that carry
        node objects, always read after arriving.
        """
        if nodes:
            return None
        if names_a_gang(pod, self.gangs.config):
            return None
        return self.runtime.held_snapshot(self.snapshot_max_age)

    async def _evaluate(
        self, pod: PodInfo, snap: Snapshot, names: list[str]
    ) -> tuple[ClassMemo | None, engine.FilterResult] | FilterOutcome:
        """The engine's verdicts on ``snap`` (through the pod's equivalence class), or the failure to answer."""
        memo = self.equivalence.memo(pod, "filter", features=snap.features)
        if memo is not None and self.shared is not None:
            await self.shared.prepare(memo, "filter", names)
        try:
            view = engine.without_own_reservation(snap, pod, names)
            return memo, engine.filter_nodes(self.policy, pod, view, names, memo)
        except Exception as exc:  # a bug must fail this pod's cycle, not the HTTP request
            log.exception("filter failed for %s", pod.key)
            return FilterOutcome.failure(f"internal error evaluating {pod.key}: {exc!r}")

    async def _conclude(
        self,
        pod: PodInfo,
        resource_version: str,
        names: list[str],
        nodes: Sequence[NodeFacts] | None,
        snap: Snapshot,
        memo: ClassMemo | None,
        result: engine.FilterResult,
    ) -> FilterOutcome:
        """The engine's verdicts through the preemptor's own victims, the gang rules and the refusal record."""
        if not result.passing and result.failed:
            snap = await self._own_victims_gone(pod, snap, result)
        if memo is not None:
            self.equivalence.count("filter", result.reused, result.computed, result.shared, result.recalled)
            if self.shared is not None:
                self.shared.collect(memo)
        if result.passing:
            try:
                verdict = await self.gangs.filter(pod, snap, result.passing)
            except (RedisError, OSError) as exc:
                return FilterOutcome.failure(f"gang state unavailable (Redis: {exc})")
            if verdict is not None and not verdict.fit:
                (result.unresolvable if verdict.unresolvable else result.failed).update(
                    verdict.failed_nodes(result.passing)
                )
                result.passing = []
        elif names:
            await self._refused(pod, snap)
        if result.passing:
            entry = self._cycles.remember(pod, resource_version, snap, memo.key if memo is not None else None)
            if self.prioritize_ahead and nodes is None and len(result.passing) > 1:
                # Runs once this call has returned and its answer is written (nothing awaits in between).
                asyncio.get_running_loop().call_soon(self._score_ahead, entry, list(result.passing))
        return FilterOutcome(result.passing, result.failed, result.unresolvable)

    async def _own_victims_gone(self, pod: PodInfo, snap: Snapshot, result: engine.FilterResult) -> Snapshot:
        """With every candidate refused: those that fit once the victims of the pod's own recent
        preemption leave are moved to ``result.passing``, and the view they fit in is returned.

        kube-scheduler retries a preemptor as soon as its informer sees the victims go, which can be
        before this snapshot does; refused, it would preempt a second time. kube-scheduler's own
        filters and bind's re-validation still see victims that are really there."""
        try:
            answered = await self.gangs.evictions.victims_for(pod.uid) if pod.uid else {}
        except (RedisError, OSError) as exc:
            log.debug("could not read the victims of %s's preemption: %s", pod.key, exc)
            return snap
        try:
            fits, view = fit_without_own_victims(self.policy, pod, snap, result.failed.keys(), answered)
        except Exception:  # the refusals stand
            log.exception("filter without the victims of %s's preemption failed", pod.key)
            return snap
        if not fits:
            return snap
        for name in fits:
            del result.failed[name]
        result.passing = fits
        self.runtime.telemetry.preemptor_retries.labels("passed").inc()
        log.info("%s fits %s once its own preemption's victims leave (not yet seen gone)", pod.key, ", ".join(fits))
        return view

    async def _refused(self, pod: PodInfo, snap: Snapshot) -> None:
        """Remember a pod refused on every node, so it is requeued in kube-scheduler if the verdict
        came from a snapshot behind what kube-scheduler had already seen (see extenders.kube.requeue)."""
        try:
            await self.gangs.park(pod, snap)
            stale = await self.runtime.store.record_refusal(
                pod.uid, pod.key, snap.generation, REFUSAL_KEEP_SECONDS, REQUEUE_INTERVAL_SECONDS
            )
        except (RedisError, OSError) as exc:  # the answer stands; only a later requeue is lost
            log.warning("could not record the refusal of %s: %s", pod.key, exc)
            return
        if stale and self.requeuer is not None:
            self.requeuer.start([(pod.uid, pod.key)], STALE_REFUSAL, "refused on a stale snapshot")

    def _score_ahead(self, cycle: Cycle, names: list[str]) -> None:
        """Prioritize's answer for the nodes a pod's filter passed, kept for its call (``Cycle``)."""
        pod = cycle.pod
        if not self._cycles.holds(cycle):  # asked for already, dropped, or filtered again since
            return
        with log_fields(verb="prioritize", pod=pod.key):
            memo = self.equivalence.memo(pod, "prioritize", cycle.class_key, cycle.snapshot.features)
            scores = cycle.scores = self._score(pod, cycle.snapshot, names, memo)
        if self.shape_ahead is not None:
            scores.answer = self.shape_ahead(scores)
        cycle.names = names
        self.runtime.telemetry.prioritize_ahead.labels("computed").inc()

    def _score(self, pod: PodInfo, snap: Snapshot, names: list[str], memo: ClassMemo | None) -> NodeScores:
        """Prioritize's answer; a failure is logged and answers neutral scores."""
        try:
            counts = engine.ScoreCounts()
            view = engine.without_own_reservation(snap, pod, names)
            values = engine.prioritize_values(self.policy, pod, view, names, memo, counts)
        except Exception:  # kube-scheduler ignores prioritize failures: neutral scores say the same
            log.exception("prioritize failed for %s", pod.key)
            return NodeScores(zip(names, repeat(0)))
        if memo is not None:
            self.equivalence.count("prioritize", counts.reused, counts.computed, counts.shared)
            if self.shared is not None:
                self.shared.collect(memo)
        return NodeScores(zip(names, values, strict=True))

    async def prioritize(self, pod: PodInfo, names: list[str], nodes: Sequence[NodeFacts] = ()) -> NodeScores:
        """Scores of the candidates ``names`` (each named once) on the current snapshot, refreshed
        first from ``nodes`` when the request carried them whole."""
        with log_fields(verb="prioritize", pod=pod.key):
            try:
                snap = await self.snapshot(nodes)
            except SnapshotUnavailable:
                # kube-scheduler ignores prioritize errors; neutral scores keep it going.
                log.warning("prioritize answered neutral scores: snapshot unavailable")
                return NodeScores((n, 0) for n in names)
            return await self._prioritize_on(pod, snap, names, None)

    def scores_ahead(self, uid: str, resource_version: str, names: list[str]) -> NodeScores | None:
        """``prioritize_in_cycle``'s answer when it is the scores computed ahead for this pod and these
        names; None (nothing taken) otherwise."""
        scores = self._cycles.take_scores(uid, resource_version, names)
        if scores is not None:
            self.runtime.telemetry.cycle_snapshots.inc()
            self.runtime.telemetry.prioritize_ahead.labels("used").inc()
        return scores

    async def prioritize_in_cycle(self, pod: CyclePod, names: list[str]) -> NodeScores:
        """``prioritize`` for a call naming its candidates, on the snapshot (and, for the same pod, the
        view, class and scores computed ahead) its filter on this replica left, if any."""
        ahead = self.scores_ahead(pod.uid, pod.resource_version, names)
        if ahead is not None:
            return ahead
        cycle = self._cycles.take(pod.uid)
        if cycle is None:
            return await self.prioritize(pod.parse(), names)
        self.runtime.telemetry.cycle_snapshots.inc()
        rv = pod.resource_version
        same = cycle if rv and rv == cycle.resource_version else None  # the same pod
        info = same.pod if same is not None else pod.parse()
        with log_fields(verb="prioritize", pod=info.key):
            return await self._prioritize_on(info, cycle.snapshot, names, same.class_key if same is not None else None)

    async def _prioritize_on(self, pod: PodInfo, snap: Snapshot, names: list[str], class_key: str | None) -> NodeScores:
        memo = self.equivalence.memo(pod, "prioritize", class_key, snap.features)
        if memo is not None and self.shared is not None:
            await self.shared.prepare(memo, "prioritize", names)
        return self._score(pod, snap, names, memo)

    async def preempt(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo] | None = None,
    ) -> dict[str, MetaVictims]:
        """Re-check kube-scheduler's candidates (node -> victim UIDs) against what only we know (PDBs,
        gangs, managed resources): the nodes kept, with their victims; none when nothing can be vouched for.
        ``victim_pods``: the victims by UID, when the request carried them whole."""
        with log_fields(verb="preempt", pod=pod.key):
            try:
                return await self.preempter.preempt(pod, candidates, victim_pods)
            except SnapshotUnavailable:
                # No snapshot, no vouching for any candidate: kube-scheduler preempts nothing this cycle.
                log.warning("preempt answered no candidates: snapshot unavailable")
                return {}

    async def explain(self, pod: PodInfo, names: list[str] | None = None) -> dict[str, Any]:
        """Every predicate's verdict and every priority's score on ``names`` (default: every node)."""
        with log_fields(verb="explain", pod=pod.key):
            snap = await self.snapshot()
            try:
                view = engine.without_own_reservation(snap, pod, snap.nodes if names is None else names)
                return engine.explain(self.policy, pod, view, names)
            except Exception as exc:
                log.exception("explain failed for %s", pod.key)
                raise Unevaluable(f"cannot evaluate {pod.key}: {exc!r}") from exc

    async def bind(self, namespace: str, name: str, uid: str, node: str, gone: asyncio.Event | None = None) -> str:
        """The protocol's error for the bind, "" when bound; ``gone`` is set when the caller
        disconnects (a held gang member then withdraws)."""
        try:
            with log_fields(verb="bind", pod=f"{namespace}/{name}", node=node):
                return await self.binds.bind(namespace, name, uid, node, gone)
        except (RedisError, OSError, TimeoutError) as exc:
            # Nothing was bound: the binding is created only after the reservation in Redis succeeded.
            log.warning("bind of %s/%s failed: Redis unavailable: %s", namespace, name, exc)
            return f"bind failed: shared state unavailable (Redis: {exc}); nothing was bound"
        except Exception as exc:  # the Error field sends the pod back to the queue; a 500 would too, less clearly
            log.exception("bind of %s/%s failed", namespace, name)
            return f"bind of {namespace}/{name} failed: internal error {exc!r}"
