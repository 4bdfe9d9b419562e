"""Runs a policy's predicates and priorities over a snapshot: filter, prioritize, explain.

Pure functions, no I/O. Per pod, every predicate's ``prepare`` runs once (PreFilter) and
the per-node loop only calls ``check`` for predicates that did not answer SKIP. Nodes the
snapshot does not know fail as unresolvable before any predicate runs.

Scores: each priority's raw scores are normalised over the candidates to 0..10, multiplied
by the priority's weight and summed; the sum is divided by the sum of the weights and
rounded half up, so the extender's answer stays within 0..MaxExtenderPriority (10) and
kube-scheduler applies the extender's own weight on top. A priority that gives every
candidate the same score cannot change the ranking and is left out of the average (unless
all are), so the priorities that do tell nodes apart keep the whole 0..10 range.

Veto scorers (``VETO_SCORERS``: NodePreferAvoidPods) are not part of that average.
Classic policies weight NodePreferAvoidPods 10000 so that, *added* to the others, it
dominates them; averaged, it would flatten every other priority into the rounding. Here,
when the policy lists a veto priority, a node it scores below MAX (a node that asks to
avoid this pod) scores 0, and every other node scores the average of the remaining
priorities but at least 1. An avoided node therefore always ends up strictly below any
node that is not avoided, and the other priorities still rank the nodes; the veto
priority's weight is accepted (classic files say 10000) but not used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import add, attrgetter, contains, eq, is_, is_not, itemgetter, lt, mul, not_, truediv
from typing import Any, cast

from extenders.equivalence import FILTER, ClassMemo, digests, fingerprint_key, fingerprints
from extenders.equivalence.packing import layout_tag, unpack_filter, unpack_scores
from extenders.labels import SelectorError
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, SKIP, ConstantScore, Filter, Scorer, ScoringContext, Verdict
from extenders.plugins.names import KUBE_SCHEDULER_FILTER, KUBE_SCHEDULER_SCORER
from extenders.plugins.registry import FILTERS, SCORERS, VETO_SCORERS
from extenders.policy import Policy
from extenders.snapshot import NominatedPods, Snapshot

NODE_NOT_FOUND = "node(s) not found in the extender's snapshot"
_NOT_FOUND = Verdict(False, NODE_NOT_FOUND, unresolvable=True)
REASON_SEPARATOR = ", "

CheckFn = Callable[[PodInfo, NodeInfo, Any], Verdict]


@dataclass(slots=True)
class FilterResult:
    passing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    reused: int = 0  # nodes whose node-local verdict came from the equivalence cache
    computed: int = 0  # nodes evaluated afresh while the cache was in use
    shared: int = 0  # of ``reused``, verdicts another replica computed (the shared tier)

    def fail(self, name: str, verdict: Verdict) -> None:
        """Note a failing node: in ``unresolvable`` when preemption cannot help, else in ``failed``."""
        (self.unresolvable if verdict.unresolvable else self.failed)[name] = verdict.reason


@dataclass(slots=True)
class _Step:
    name: str
    filter: Filter
    state: Any
    error: Verdict | None = None  # prepare failed: every node gets this verdict


@dataclass(slots=True, frozen=True)
class _Layout:
    """The active steps split for the equivalence cache, in policy order.

    ``local``: (check, state, how many of ``families`` the verdict rests on once this step has
    run); ``cross``: (how many local steps come before it, check, state) for the steps that read
    other nodes and are evaluated on every call.
    """

    families: tuple[str, ...]
    local: list[tuple[CheckFn, Any, int]]
    cross: list[tuple[int, CheckFn, Any]]
    key: str  # where a node keeps its fingerprints of ``families``
    tag: int  # the layout's steps and families, for entries shared between replicas
    signature: str  # what ``tag`` digests, in full (no collision can pass one layout for another)


def _invalid_check(pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
    verdict: Verdict = state
    return verdict


class PreparedPod:
    """A pod's prepared predicate states against one snapshot, reusable across nodes.

    ``with_node`` derives the states for the same snapshot with one node replaced (for
    instance without preemption victims) without rescanning the cluster.
    """

    __slots__ = ("_active", "_layout", "_override", "_parent", "_snapshot", "pod", "policy", "steps")

    def __init__(
        self,
        policy: Policy,
        pod: PodInfo,
        snapshot: Snapshot | None,
        steps: list[_Step],
        parent: PreparedPod | None = None,
        override: NodeInfo | None = None,
    ) -> None:
        """Either ``snapshot``, or ``parent`` and the ``override`` node replacing its namesake."""
        self.policy = policy
        self.pod = pod
        self._snapshot = snapshot
        self._parent = parent
        self._override = override
        self.steps = steps
        self._active: list[tuple[str, CheckFn, Any]] = []
        self._layout: _Layout | None = None
        for step in steps:
            if step.error is not None:
                self._active.append((step.name, _invalid_check, step.error))
            elif step.state is not SKIP:
                self._active.append((step.name, step.filter.check, step.state))

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot the states describe; for ``with_node`` results, built on first use.

        Fit checks never read it, so preemption's many ``with_node`` calls do not copy the
        node table; only ``filter_prepared`` and other explicit readers pay for the overlay.
        """
        if self._snapshot is None:
            parent, node = self._parent, self._override
            assert parent is not None and node is not None
            base = parent.snapshot
            # Every table shared; only the node table differs, so derived data is not reused.
            self._snapshot = dataclasses.replace(
                base, nodes={**base.nodes, node.name: node}, sealed=False, summary_seed=base.seed(), node_changes=None
            )
        return self._snapshot

    def _node(self, name: str) -> NodeInfo | None:
        """The node named ``name`` as these states see it, without building the overlay."""
        prepared: PreparedPod | None = self
        while prepared is not None and prepared._snapshot is None:
            override = prepared._override
            if override is not None and override.name == name:
                return override
            prepared = prepared._parent
        return prepared.snapshot.nodes.get(name) if prepared is not None else None

    @classmethod
    def build(cls, policy: Policy, pod: PodInfo, snapshot: Snapshot) -> PreparedPod:
        steps: list[_Step] = []
        for name in policy.predicate_names:
            plugin = FILTERS[name]
            try:
                steps.append(_Step(name, plugin, plugin.prepare(pod, snapshot)))
            except SelectorError as exc:
                steps.append(_Step(name, plugin, None, Verdict(False, f"invalid pod spec: {exc}", True)))
        return cls(policy, pod, snapshot, steps)

    def with_node(self, node: NodeInfo) -> PreparedPod:
        """States as if the snapshot held ``node`` in place of its node of the same name.

        Cheap: the predicates' ``adjust`` runs on the one node; the snapshot with ``node``
        in it is only materialised if someone reads ``snapshot``.
        """
        old = self._node(node.name)
        if old is node:
            return self
        steps: list[_Step] = []
        for step in self.steps:
            adjust = step.filter.adjust
            if step.error is None and adjust is not None:
                steps.append(_Step(step.name, step.filter, adjust(step.state, self.pod, old, node)))
            else:
                steps.append(step)
        return PreparedPod(self.policy, self.pod, None, steps, parent=self, override=node)

    def first_failure(self, node: NodeInfo | None) -> Verdict | None:
        """The first failing verdict in policy order, or None when the node fits."""
        if node is None or node.node is None:
            return _NOT_FOUND
        pod = self.pod
        for _name, check, state in self._active:
            verdict = check(pod, node, state)
            if not verdict.fit:
                return verdict
        return None

    def verdict(self, node: NodeInfo | None) -> Verdict | None:
        """The node's failure as the policy reports it (the first, or all combined), or None."""
        if self.policy.always_check_all_predicates:
            failures = self.failures(node)
            return None if not failures else failures[0] if len(failures) == 1 else combine(failures)
        return self.first_failure(node)

    def cacheable(self) -> bool:
        """False when a node-local filter's state for this pod depends on other nodes (see ``Filter``)."""
        for step in self.steps:
            cacheable = step.filter.cacheable
            if cacheable is not None and step.error is None and not cacheable(step.state):
                return False
        return True

    def layout(self) -> _Layout:
        if self._layout is None:
            families: list[str] = []
            local: list[tuple[CheckFn, Any, int]] = []
            cross: list[tuple[int, CheckFn, Any]] = []
            by_name = {step.name: step for step in self.steps}
            signature: list[str] = []
            for name, check, state in self._active:
                reads = by_name[name].filter.node_families
                if reads is None:
                    cross.append((len(local), check, state))
                    signature.append(f"cross:{name}")
                    continue
                families.extend(f for f in reads if f not in families)
                local.append((check, state, len(families)))
                signature.append(f"local:{name}:{len(families)}")
            signature.append("families:" + ",".join(families))
            key = fingerprint_key(tuple(families))
            text = "|".join(signature)
            self._layout = _Layout(tuple(families), local, cross, key, layout_tag(text), text)
        return self._layout

    def failures(self, node: NodeInfo | None) -> list[Verdict]:
        """Every failing verdict, in policy order (empty when the node fits)."""
        if node is None or node.node is None:
            return [_NOT_FOUND]
        pod = self.pod
        out: list[Verdict] = []
        for _name, check, state in self._active:
            verdict = check(pod, node, state)
            if not verdict.fit:
                out.append(verdict)
        return out

    def evaluate(self, node: NodeInfo | None) -> list[tuple[str, Verdict]]:
        """Every predicate's verdict by name, in policy order (SKIP counts as a fit)."""
        if node is None or node.node is None:
            return [(step.name, _NOT_FOUND) for step in self.steps]
        results: dict[str, Verdict] = {}
        for name, check, state in self._active:
            results[name] = check(self.pod, node, state)
        return [(step.name, results.get(step.name, Verdict(True))) for step in self.steps]


def prepare_pod(policy: Policy, pod: PodInfo, snapshot: Snapshot) -> PreparedPod:
    return PreparedPod.build(policy, pod, snapshot)


# ---------------------------------------------------------------- nominated pods
DEFAULT_SCHEDULER = "default-scheduler"


def _scheduler_of(pod: PodInfo) -> str:
    return pod.scheduler_name or DEFAULT_SCHEDULER


def nominated_to_add(pod: PodInfo, node: NodeInfo, nominated: NominatedPods, snapshot: Snapshot) -> list[PodInfo]:
    """The pods nominated to ``node`` that ``pod`` must leave room for (kube-scheduler's addGENominatedPods).

    Those of at least ``pod``'s priority, other than ``pod`` itself, and only of ``pod``'s scheduler:
    kube-scheduler knows the nominations of its own queue alone. One already placed (on this node
    it is counted there; on another one kube-scheduler dropped the nomination when it assumed it)
    is left out.
    """
    candidates = nominated.get(node.name)
    if not candidates:
        return []
    priority, uid, scheduler = pod.priority, pod.uid, _scheduler_of(pod)
    return [
        p
        for p in candidates
        if p.priority >= priority
        and p.uid != uid
        and _scheduler_of(p) == scheduler
        and p.uid not in node.pods
        and snapshot.find_pod(p.uid) is None
    ]


def with_pods(node: NodeInfo, pods: Iterable[PodInfo]) -> NodeInfo:
    """A copy of ``node`` holding ``pods`` as well (``node`` is shared with the snapshot: never changed)."""
    return NodeInfo.build(node.name, node.node, [*node.pods.values(), *pods], node.generation)


def without_own_reservation(snapshot: Snapshot, pod: PodInfo, node_names: Collection[str]) -> Snapshot:
    """``snapshot`` as kube-scheduler sees it when it schedules ``pod`` again: without the pod's own
    reservation on one of the candidates. A reservation outlives a bind whose replica died, or whose
    Binding got no answer; counted against the pod itself, it would keep the pod off the very node
    it holds (on a full cluster: off every node) until it expires. Bound pods stay counted."""
    uid = pod.uid
    name = snapshot.find_reservation(uid) if uid else None
    if name is None or name not in node_names:
        return snapshot
    info = snapshot.nodes[name]
    nodes = dict(snapshot.nodes)
    nodes[name] = NodeInfo.build(name, info.node, [p for p in info.pods.values() if p.uid != uid], info.generation)
    return dataclasses.replace(snapshot, nodes=nodes, sealed=False, summary_seed=snapshot.seed(), node_changes=None)


def _with_nominated(
    prepared: PreparedPod, node: NodeInfo, nominated: NominatedPods
) -> tuple[PreparedPod, NodeInfo, list[PodInfo]] | None:
    """The pod's states and the node with the nominated pods it must yield to added, or None when none."""
    extra = nominated_to_add(prepared.pod, node, nominated, prepared.snapshot)
    if not extra:
        return None
    grown = with_pods(node, extra)
    return prepared.with_node(grown), grown, extra


def _yield_to_nominated(prepared: PreparedPod, result: FilterResult, nominated: NominatedPods) -> None:
    """kube-scheduler's RunFilterPluginsWithNominatedPods over ``result`` (in place).

    A node holding nominated pods the pod must yield to passes only if it passes both with them
    and without them (the verdict already in ``result``); when it fails with them, that failure
    is the one reported. Only the nodes named in ``nominated`` are looked at.
    """
    nodes = prepared.snapshot.nodes
    passing: set[str] | None = None
    overrides: dict[str, Verdict] = {}
    for name in nominated:
        node = nodes.get(name)
        if node is None or node.node is None:
            continue
        if name not in result.failed and name not in result.unresolvable:
            if passing is None:
                passing = set(result.passing)
            if name not in passing:  # not asked about
                continue
        added = _with_nominated(prepared, node, nominated)
        if added is None:
            continue
        with_them, grown, _extra = added
        verdict = with_them.verdict(grown)
        if verdict is not None:
            overrides[name] = verdict
    if not overrides:
        return
    result.passing = [name for name in result.passing if name not in overrides]
    for name, verdict in overrides.items():
        result.failed.pop(name, None)
        result.unresolvable.pop(name, None)
        result.fail(name, verdict)


def combine(verdicts: list[Verdict]) -> Verdict:
    """Several failures as one: distinct reasons joined, unresolvable if any is."""
    reasons: list[str] = []
    for verdict in verdicts:
        for part in verdict.reason.split(REASON_SEPARATOR):
            if part not in reasons:
                reasons.append(part)
    return Verdict(False, REASON_SEPARATOR.join(reasons), any(v.unresolvable for v in verdicts))


def filter_nodes(
    policy: Policy, pod: PodInfo, snapshot: Snapshot, node_names: Iterable[str], memo: ClassMemo | None = None
) -> FilterResult:
    """Split ``node_names`` into passing, failed (preemption may help) and unresolvable.

    With ``memo`` (the pod's equivalence class), node-local verdicts are reused where the node's
    relevant parts are unchanged; ``reused`` and ``computed`` on the result count the nodes.
    Pods nominated to a node are then accounted for as kube-scheduler does (``Snapshot.nominated``),
    on those nodes only.
    """
    prepared = PreparedPod.build(policy, pod, snapshot)
    if memo is not None and memo.admitted and not policy.always_check_all_predicates and prepared.cacheable():
        result = _filter_cached(prepared, node_names, memo)
    else:
        result = filter_prepared(prepared, node_names)
        if memo is not None:
            result.computed = len(result.passing) + len(result.failed) + len(result.unresolvable)
    nominated = snapshot.nominated()
    if nominated:
        _yield_to_nominated(prepared, result, nominated)
    return result


_PODS = attrgetter("pods")
_VERSION = attrgetter("version")
_SCORES = itemgetter(1)  # of a ScoreEntry


def _holds_pod(snapshot: Snapshot, uid: str, names: list[str], infos: list[NodeInfo]) -> bool:
    """Whether one of the candidates (``infos``, named ``names``) holds the pod ``uid`` (placed or
    reserved there). A pod the snapshot has pending can only be placed as a reservation, which the
    summary indexes; for any other, every candidate is looked at."""
    if uid in snapshot.pending:
        reserved = snapshot.find_reservation(uid)
        return reserved is not None and reserved in names
    return any(map(contains, map(_PODS, infos), repeat(uid)))


def _filter_cached(prepared: PreparedPod, node_names: Iterable[str], memo: ClassMemo) -> FilterResult:
    """``filter_prepared`` with node-local verdicts reused from ``memo`` (see ``_filter_walk``).

    When every candidate is known and none holds the pod, a candidate whose ``NodeInfo.version``
    is the one ``memo.held`` notes keeps its node-local verdict in ``memo.outcome``, read without the
    node's fingerprints and entry. With every step node-local that is the answer, in a few passes
    over the names in C, and only the other candidates are walked (and held for the next call); with
    steps that read other nodes, the walk takes the held verdicts and runs those steps on each node.
    """
    layout = prepared.layout()
    names = node_names if isinstance(node_names, list) else list(node_names)
    snapshot = prepared.snapshot
    found = list(map(snapshot.nodes.get, names))
    if any(map(is_, found, repeat(None))):
        return _filter_walk(prepared, names, memo, hold=False)
    infos = cast(list[NodeInfo], found)
    if _holds_pod(snapshot, prepared.pod.uid, names, infos):
        return _filter_walk(prepared, names, memo, hold=False)
    held = memo.held
    if memo.held_layout != layout.signature:
        held.clear()
        memo.outcome.clear()
        memo.held_at.clear()
        memo.held_layout = layout.signature
    same = list(map(eq, map(held.get, names, repeat(0)), map(_VERSION, infos)))  # versions start at 1
    if layout.cross:  # the steps that read other nodes still run on each node
        return _filter_walk(prepared, names, memo, hold=True, infos=infos, kept=same)
    computed = from_shared = 0
    if False in same:
        walked = _filter_walk(prepared, list(compress(names, map(not_, same))), memo, hold=True)
        computed, from_shared = walked.computed, walked.shared
    verdicts = list(map(memo.outcome.__getitem__, names))
    result = FilterResult(list(compress(names, map(is_, verdicts, repeat(None)))))
    if len(result.passing) != len(names):
        fail = result.fail
        for name, verdict in compress(zip(names, verdicts, strict=True), map(is_not, verdicts, repeat(None))):
            if verdict is not None:  # always (compressed so); the type checker cannot tell
                fail(name, verdict)
    result.reused, result.computed, result.shared = len(names) - computed, computed, from_shared
    return result


def _filter_walk(
    prepared: PreparedPod,
    names: list[str],
    memo: ClassMemo,
    hold: bool,
    infos: Sequence[NodeInfo | None] | None = None,
    kept: list[bool] | None = None,
) -> FilterResult:
    """``filter_prepared`` with node-local verdicts reused from ``memo`` where the parts of the node
    they rest on are unchanged, and stored there where not.

    A memo entry is ``(fingerprints, known, failed_at, verdict)``: the node's fingerprints when it
    was evaluated, how many of them the verdict rests on, the position of the first failing local
    step (-1: none) and its verdict. The steps that read other nodes run on every call, in policy
    order: those before the failing local step, or all of them when the node passed. A node the
    memo has no valid entry for may have one from another replica (``memo.shared``), taken when the
    digests it carries are the node's; what is computed goes to ``memo.outbox`` when there is one.
    ``hold``: no node holds the pod; each node's node-local verdict is noted in ``memo.held``,
    ``memo.outcome`` and ``memo.held_at`` for ``_filter_cached``, and ``kept`` (with ``infos``, the
    named nodes) says which nodes' noted verdicts still hold: those are taken as they are.
    """
    result = FilterResult()
    passing, failed, unresolvable = result.passing, result.failed, result.unresolvable
    nodes = prepared.snapshot.nodes
    pod = prepared.pod
    uid = pod.uid
    layout = prepared.layout()
    families, key, local, cross, tag = layout.families, layout.key, layout.local, layout.cross, layout.tag
    everything = len(local)
    entries = memo.filter
    shared = memo.shared.get(FILTER)
    outbox = memo.outbox
    held, held_verdicts, held_at = memo.held, memo.outcome, memo.held_at
    pass_node = passing.append
    # Counted where rare (most nodes are reused): reused = every node - computed.
    computed = from_shared = 0
    found = infos if infos is not None else list(map(nodes.get, names))
    for name, node, still in zip(names, found, kept or [False] * len(names), strict=True):
        verdict: Verdict | None
        if still and node is not None:  # (a node is held only when known)
            verdict = held_verdicts[name]
            if cross and verdict is not _NOT_FOUND:
                verdict = _cross_checks(pod, node, cross, held_at[name], everything, verdict)
        elif node is None or node.node is None:
            verdict = _NOT_FOUND
            computed += 1
            if hold and node is not None:
                held[name], held_verdicts[name], held_at[name] = node.version, verdict, -1
        elif uid in node.pods:  # some filters leave the pod itself out: not a class-wide answer
            verdict = prepared.first_failure(node)
            computed += 1
        else:
            current = node.derived.get(key)
            if current is None:
                current = fingerprints(node, families, key)
            entry = entries.get(name)
            if entry is not None and (
                entry[0] is current or current[: entry[1]] == entry[0][: entry[1]]  # the node changed elsewhere
            ):
                _, _, failed_at, verdict = entry
            elif (
                shared
                and (blob := shared.pop(name, None)) is not None
                and (taken := unpack_filter(blob, tag, digests(node, families)))
            ):
                from_shared += 1
                known, failed_at, verdict = taken
                entries[name] = (current, known, failed_at, verdict)
            else:
                computed += 1
                failed_at, verdict, known = -1, None, len(families)
                for position, (check, state, reads) in enumerate(local):
                    outcome = check(pod, node, state)
                    if not outcome.fit:
                        failed_at, verdict, known = position, outcome, reads
                        break
                entries[name] = (current, known, failed_at, verdict)
                if outbox is not None:
                    outbox.append((FILTER, name, node, families, (tag, known, failed_at, verdict)))
            if hold:
                held[name], held_verdicts[name], held_at[name] = node.version, verdict, failed_at
            if cross:
                verdict = _cross_checks(pod, node, cross, failed_at, everything, verdict)
        if verdict is None:
            pass_node(name)
        elif verdict.unresolvable:
            unresolvable[name] = verdict.reason
        else:
            failed[name] = verdict.reason
    result.reused, result.computed, result.shared = len(names) - computed, computed, from_shared
    return result


def _cross_checks(
    pod: PodInfo,
    node: NodeInfo,
    cross: list[tuple[int, CheckFn, Any]],
    failed_at: int,
    everything: int,
    verdict: Verdict | None,
) -> Verdict | None:
    """The node's verdict once the steps that read other nodes have run, in policy order: those
    before the first failing node-local step (``failed_at``; all of them when none failed)."""
    limit = everything if failed_at < 0 else failed_at
    for before, check, state in cross:
        if before > limit:
            break
        outcome = check(pod, node, state)
        if not outcome.fit:
            return outcome
    return verdict


def filter_prepared(prepared: PreparedPod, node_names: Iterable[str]) -> FilterResult:
    result = FilterResult()
    passing, failed, unresolvable = result.passing, result.failed, result.unresolvable
    nodes = prepared.snapshot.nodes
    for name in node_names:
        verdict = prepared.verdict(nodes.get(name))
        if verdict is None:
            passing.append(name)
        elif verdict.unresolvable:
            unresolvable[name] = verdict.reason
        else:
            failed[name] = verdict.reason
    return result


def fits(
    policy: Policy, pod: PodInfo, node: NodeInfo, snapshot: Snapshot, prepared: PreparedPod | None = None
) -> list[Verdict]:
    """Failing verdicts of every predicate for ``pod`` on ``node`` (empty list: it fits).

    ``node`` may be a modified copy of the snapshot's node (victims removed): the prepared
    states are adjusted to it. Pass ``prepared`` (from ``prepare_pod``) to reuse the
    snapshot-wide work across many such checks.
    """
    base = prepared if prepared is not None else PreparedPod.build(policy, pod, snapshot)
    return base.with_node(node).failures(node)


# ---------------------------------------------------------------- priorities
def _context(policy: Policy, snapshot: Snapshot | None = None) -> ScoringContext:
    return ScoringContext(
        resource_weights=dict(policy.resource_weights),
        hard_pod_affinity_symmetric_weight=policy.hard_pod_affinity_symmetric_weight,
        summary=snapshot.summary() if snapshot is not None else None,
    )


@dataclass(slots=True)
class ScoreCounts:
    """Raw scores of node-local scorers taken from the equivalence cache, and computed afresh."""

    reused: int = 0
    computed: int = 0
    shared: int = 0  # of ``reused``, those another replica computed (the shared tier)


@dataclass(slots=True)
class _Group:
    """Scorers reading the same node parts, cached together: one entry per node holds all their raw
    scores. ``key`` names the group in the class's memo (and in the shared tier)."""

    key: str
    families: tuple[str, ...]
    names: list[str]  # the priorities, in policy order
    members: list[tuple[Scorer, Any]]  # (scorer, its state for this pod)


def _cached_raw(
    group: _Group,
    pod: PodInfo,
    infos: list[NodeInfo],
    names: list[str],
    ctx: ScoringContext,
    memo: ClassMemo,
    counts: ScoreCounts,
) -> list[list[float]]:
    """Each of the group's scorers' raw scores on ``infos``: kept ones where the node's fingerprints
    of the group's families are unchanged, then valid ones another replica stored (``memo.shared``),
    the rest computed in one ``score_all`` per scorer over just those nodes, kept, and handed to
    ``memo.outbox`` when there is one. One lookup per node serves the whole group."""
    members, families = group.members, group.families
    key = fingerprint_key(families)
    entries = memo.scores.get(group.key)
    if entries is None:
        entries = memo.scores[group.key] = {}
    held = memo.score_held.get(group.key)
    if held is None:
        held = memo.score_held[group.key] = {}
    # A node at the version its entry was last found valid at keeps it unchecked (see
    # ``_filter_cached``); when that holds for every node, the columns come straight from the entries.
    same = list(map(eq, map(held.get, names, repeat(0)), map(_VERSION, infos)))
    if False not in same:
        counts.reused += len(infos) * len(members)
        return list(map(list, zip(*map(_SCORES, map(entries.__getitem__, names)), strict=True)))
    shared = memo.shared.get(group.key)
    rows: list[tuple[float, ...]] = []
    append = rows.append
    missing: list[int] = []
    current_of: list[tuple[Any, ...]] = []
    # ``names``: the infos' names
    for info, entry, kept in zip(infos, map(entries.get, names), same, strict=True):
        if kept:
            append(entry[1])  # type: ignore[index]  # held names have entries
            continue
        current = info.derived.get(key)
        if current is None:
            current = fingerprints(info, families, key)
        if entry is not None and (entry[0] is current or entry[0] == current):
            append(entry[1])
            held[info.name] = info.version
        elif (
            shared
            and (blob := shared.pop(info.name, None)) is not None
            and (values := unpack_scores(blob, len(members), digests(info, families))) is not None
        ):
            append(values)
            entries[info.name] = (current, values)
            held[info.name] = info.version
            counts.shared += len(members)
        else:
            missing.append(len(rows))
            current_of.append(current)
            append(())
    if missing:
        subset = [infos[i] for i in missing]
        columns: list[list[float]] = []
        for scorer, state in members:
            score_all = scorer.score_all
            if score_all is not None:
                columns.append(score_all(pod, subset, state, ctx))
            else:
                score = scorer.score
                columns.append([score(pod, info, state, ctx) for info in subset])
        outbox = memo.outbox
        for i, current, values in zip(missing, current_of, zip(*columns, strict=True), strict=True):
            rows[i] = values
            entries[names[i]] = (current, values)
            held[names[i]] = infos[i].version
            if outbox is not None:
                outbox.append((group.key, names[i], infos[i], group.families, values))
    counts.reused += (len(infos) - len(missing)) * len(members)
    counts.computed += len(missing) * len(members)
    return list(map(list, zip(*rows, strict=True)))


def group_key(priorities: Iterable[str]) -> str:
    """The memo's name of a group of cached scorers."""
    return "+".join(priorities)


def _cached_groups(scorers: Iterable[tuple[str, Scorer, Any]]) -> list[_Group]:
    """The node-local ones of (priority, scorer, state), grouped by the node parts they read."""
    groups: dict[tuple[str, ...], _Group] = {}
    for prio_name, scorer, state in scorers:
        families = scorer.node_families
        if families is not None:
            group = groups.get(families)
            if group is None:
                group = groups[families] = _Group("", families, [], [])
            group.names.append(prio_name)
            group.members.append((scorer, state))
    for group in groups.values():
        group.key = group_key(group.names)
    return list(groups.values())


def score_groups(policy: Policy) -> list[str]:
    """The keys of the scorer groups the policy's prioritize may cache (a scorer that turns out
    constant for a pod leaves its group, whose key then differs): what the shared tier fetches."""
    return [g.key for g in _cached_groups((name, SCORERS[name], None) for name, _ in policy.priority_weights)]


def _score(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    infos: list[NodeInfo],
    detail: bool,
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> tuple[dict[str, int], dict[str, dict[str, dict[str, float]]]]:
    """``memo`` (the pod's class, admitted): raw scores of node-local scorers are reused from it and
    kept in it; ``counts`` then says how many were."""
    names = [info.name for info in infos]
    unique = list(dict.fromkeys(names))
    details: dict[str, dict[str, dict[str, float]]] = {n: {} for n in unique} if detail else {}
    weights = policy.priority_weights
    if not weights or not infos:
        return dict.fromkeys(names, 0), details
    ctx = _context(policy, snapshot)
    vetoed: set[str] | None = None  # None: the policy has no veto priority
    # (weight, each unique name's normalised score or None, the score when constant)
    contributions: list[tuple[int, list[float] | None, float]] = []
    prepared: list[tuple[str, int, Scorer, Any, ConstantScore | None]] = []
    for prio_name, weight in weights:
        scorer = SCORERS[prio_name]
        state = scorer.prepare(pod, snapshot, infos, ctx)
        constant_of = scorer.constant
        prepared.append(
            (prio_name, weight, scorer, state, constant_of(pod, snapshot, infos, state, ctx) if constant_of else None)
        )
    cached: dict[str, list[float]] = {}  # raw scores of the node-local scorers, through the class's memo
    if memo is not None:
        variable = ((prio_name, scorer, state) for prio_name, _, scorer, state, fixed in prepared if fixed is None)
        for group in _cached_groups(variable):
            raws = _cached_raw(group, pod, infos, names, ctx, memo, counts or ScoreCounts())
            cached.update(zip(group.names, raws, strict=True))
    for prio_name, weight, scorer, state, fixed in prepared:
        if fixed is not None:
            raw_value, value = fixed
            if prio_name in VETO_SCORERS:
                vetoed = vetoed if vetoed is not None else set()
                if value < MAX_PRIORITY:
                    vetoed.update(unique)
            else:
                contributions.append((weight, None, value))
            if detail:
                for name in unique:
                    details[name][prio_name] = {"raw": raw_value, "score": value}
            continue
        raw_values = cached.get(prio_name)
        if raw_values is None:
            score_all = scorer.score_all
            if score_all is not None:
                raw_values = score_all(pod, infos, state, ctx)
            else:
                score = scorer.score
                raw_values = [score(pod, info, state, ctx) for info in infos]
        normalize_values = scorer.normalize_values
        if normalize_values is not None and not detail and len(unique) == len(names):
            values = normalize_values(raw_values, state)  # one name each: the lists line up with ``unique``
        else:
            raw = dict(zip(names, raw_values, strict=True))
            normalized = scorer.normalize(raw, state)
            values = list(map(normalized.get, unique, repeat(0.0)))
        if prio_name in VETO_SCORERS:
            vetoed = vetoed if vetoed is not None else set()
            vetoed.update(compress(unique, map(lt, values, repeat(MAX_PRIORITY))))
        else:
            contributions.append((weight, values, 0.0))
        if detail:
            for name, value in zip(unique, values, strict=True):
                details[name][prio_name] = {"raw": raw[name], "score": value}
    # A priority that scores every candidate alike cannot change the ranking; leaving it out of the
    # average keeps the whole 0..10 range for the priorities that do tell the candidates apart.
    varying = [c for c in contributions if c[1] is not None and c[1].count(c[1][0]) != len(c[1])]
    used = varying or contributions
    weight_sum = sum(w for w, _, _ in used)
    totals = [0.0] * len(unique)
    if len(unique) == len(names):
        for weight, scores, value in used:
            if scores is None:
                product = weight * value
                totals = [t + product for t in totals]
            else:
                totals = list(map(add, totals, map(mul, repeat(weight), scores)))
    else:
        # A name listed twice adds its scores twice (as before this loop was vectorised).
        position = {name: i for i, name in enumerate(unique)}
        for weight, scores, value in used:
            for name in names:
                i = position[name]
                totals[i] += weight * (value if scores is None else scores[i])
    if weight_sum:
        # Rounded half up and capped at MAX, inlined: this runs once per candidate.
        rounded = [int(v + 0.5) if v >= 0 else 0 for v in map(truediv, totals, repeat(weight_sum))]
        final = dict(zip(unique, [r if r < MAX_PRIORITY else MAX_PRIORITY for r in rounded], strict=True))
    else:
        final = dict.fromkeys(unique, 0)
    if vetoed is not None:
        final = {n: 0 if n in vetoed else (s or 1) for n, s in final.items()}  # s or 1: max(1, s) for s >= 0
    return final, details


def prioritize_nodes(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    node_names: Iterable[str],
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> list[tuple[str, int]]:
    """(host, score 0..10) for every requested node, in request order; unknown nodes score 0.

    With ``memo`` (the pod's class), raw scores of node-local scorers are reused once the class is
    admitted; ``counts`` then says how many were reused and computed. (No node-local scorer leaves
    the pod itself out, so unlike filter verdicts its raw scores hold wherever the pod is.)
    """
    names = list(node_names)
    scores = prioritize_scores(policy, pod, snapshot, names, memo, counts)
    return [(n, scores.get(n, 0)) for n in names]


def prioritize_scores(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    names: list[str],
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> dict[str, int]:
    """``prioritize_nodes`` as a mapping of the known nodes' scores (the caller shapes the answer in
    one pass; a name missing from it scores 0)."""
    nodes = snapshot.nodes
    infos = [info for n in names if (info := nodes.get(n)) is not None and info.node is not None]
    if memo is not None and not memo.admitted:
        memo = None
    scores, _ = _score(policy, pod, snapshot, infos, detail=False, memo=memo, counts=counts)
    return scores


# ---------------------------------------------------------------- explain
def _evaluate_with_nominated(
    prepared: PreparedPod, node: NodeInfo | None, nominated: NominatedPods
) -> tuple[list[tuple[str, Verdict]], list[PodInfo]]:
    """Every predicate's verdict, and the nominated pods they were judged with when those change it.

    As in kube-scheduler, a node must pass without and with the pods nominated to it: a predicate
    that passes alone but fails with them reports that failure.
    """
    verdicts = prepared.evaluate(node)
    if node is None or node.node is None or not nominated:
        return verdicts, []
    added = _with_nominated(prepared, node, nominated)
    if added is None:
        return verdicts, []
    states, grown, extra = added
    with_them = dict(states.evaluate(grown))
    merged = [(name, v if not v.fit else with_them.get(name, v)) for name, v in verdicts]
    return merged, extra if merged != verdicts else []


def explain(
    policy: Policy, pod: PodInfo, snapshot: Snapshot, node_names: Iterable[str] | None = None
) -> dict[str, Any]:
    """Every predicate's verdict on every node, and the priorities over the nodes that fit.

    ``{"nodes": {name: {"fit", "first_failure": {"predicate", "plugin", "reason"} | None,
    "nominated_pods": [...], "predicates": {pred: {"plugin", "fit", "reason", "unresolvable"}},
    "priorities": {prio: {"plugin", "raw", "score"}}, "score"}}}``; ``plugin`` names the
    kube-scheduler plug-in that decides the same, ``first_failure`` is the failure kube-scheduler
    would report (the first in policy order) and ``nominated_pods`` the pods nominated to the node
    that the verdicts counted (only when they changed one). Nodes that do not fit have no
    priorities and score 0. All predicates are evaluated regardless of the policy's
    ``alwaysCheckAllPredicates``.
    """
    names = sorted(snapshot.nodes) if node_names is None else list(node_names)
    prepared = PreparedPod.build(policy, pod, snapshot)
    nominated = snapshot.nominated()
    out: dict[str, dict[str, Any]] = {}
    fitting: list[NodeInfo] = []
    for name in names:
        node = snapshot.nodes.get(name)
        verdicts, counted = _evaluate_with_nominated(prepared, node, nominated)
        fit = node is not None and node.node is not None and all(v.fit for _, v in verdicts)
        first = next(((pred, v) for pred, v in verdicts if not v.fit), None)
        failure = None
        if first is not None:
            plugin = KUBE_SCHEDULER_FILTER.get(first[0], first[0])
            failure = {"predicate": first[0], "plugin": plugin, "reason": first[1].reason}
        out[name] = {
            "fit": fit,
            "first_failure": failure,
            "nominated_pods": [p.key for p in counted],
            "predicates": {
                pred: {
                    "plugin": KUBE_SCHEDULER_FILTER.get(pred, pred),
                    "fit": v.fit,
                    "reason": v.reason,
                    "unresolvable": v.unresolvable,
                }
                for pred, v in verdicts
            },
            "priorities": {},
            "score": 0,
        }
        if fit and node is not None:
            fitting.append(node)
    scores, details = _score(policy, pod, snapshot, fitting, detail=True)
    for info in fitting:
        entry = out[info.name]
        entry["priorities"] = {
            prio: {"plugin": KUBE_SCHEDULER_SCORER.get(prio, prio), **detail}
            for prio, detail in details.get(info.name, {}).items()
        }
        entry["score"] = scores.get(info.name, 0)
    return {"nodes": out}
