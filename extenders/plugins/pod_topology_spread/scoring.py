"""PodTopologySpread (scoring): prefer domains holding fewer matching pods, for the pod's
``whenUnsatisfiable: ScheduleAnyway`` constraints (DoNotSchedule ones are the filter's job).

As today's plugin: for each constraint, count the pods matching its selector (same namespace,
not terminating) per topology domain over every node that passes the constraint's node
inclusion policies; a candidate's raw score is ``Σ count * log(domains + 2) + (maxSkew - 1)``.
Candidates missing a constraint's topology key are ignored (score 0). The raw score is rounded to
a whole number, as the plug-in's int64 score is, before normalisation maps the lowest raw score to
MAX: ``MAX * (max + min - raw) / max``. The rounding matters: the weights are logarithms, and two
nodes a fraction apart may be equal or a whole point apart, which normalisation then magnifies.

A pod that declares no topologySpreadConstraints at all gets kube-scheduler's system defaults:
``kubernetes.io/hostname`` with maxSkew 3 and ``topology.kubernetes.io/zone`` with maxSkew 5, both
ScheduleAnyway, counting the pods its default selector picks (Services and controller, see
``extenders.plugins.helper.default_selector``). With those defaults a candidate is never ignored
for lacking a topology key: it scores only the constraints whose key it carries, candidates without
the zone label form a domain of their own ('') in the zone weight, and pods on nodes without the
label count towards that domain. A pod whose default selector is empty, or whose declared
constraints are all DoNotSchedule, is skipped, i.e. contributes nothing: every node scores 0.

The counts per domain are a tally of the snapshot's summary, kept across snapshots and brought up
to date from the changed nodes only; its key is everything the counts read (namespace, topology
keys, what each constraint counts, the inclusion policies and what they read of the pod). A first
count visits only the nodes holding a pod with the selectors' indexed labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_
from typing import Any, cast

from extenders.canonical import canonical_json
from extenders.labels import (
    LabelMatcher,
    NodeMatcher,
    SelectorError,
    compile_label_selector,
    compile_map_selector,
    compile_node_selector_terms,
    required_node_affinity_terms,
)
from extenders.model import LabelKey, NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext, summary_of
from extenders.plugins.helper.default_selector import default_query
from extenders.plugins.helper.normalize import constant
from extenders.plugins.pod_topology_spread.selectors import constraint_selector, counts_nothing, eligibility_key
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery, namespace_query
from extenders.snapshot.summary import ClusterSummary, infos_named
from extenders.snapshot.tally import Contribution
from extenders.tolerations import first_untolerated_taint

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
_DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(slots=True)
class Constraint:
    topology_key: str
    max_skew: int
    query: PodQuery | None  # None: a missing, empty or invalid selector, which counts no pods
    honor_node_affinity: bool
    honor_taints: bool
    weight: float = 0.0  # log(number of candidate domains + 2), set in prepare
    # What ``query`` counts, as a tally key part: the selector's canonical JSON, or the (memoised)
    # default query object itself, whose identity then stands for its selector.
    counted: object = None


@dataclass(slots=True)
class SpreadState:
    namespace: str
    constraints: list[Constraint]
    ignored: set[str] = field(default_factory=set)
    # False with the system-default constraints: candidates need not carry every topology key.
    require_all: bool = True
    pair_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    # Per constraint: node name -> its value of the topology key (nodes that have it).
    values: list[dict[str, str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the candidates, in the order prepare saw them
    # The candidates' list prepare saw, and per constraint each one's topology value (None: none).
    nodes: list[NodeInfo] | None = None
    found: list[list[str | None]] = field(default_factory=list)


def _label_of(key: str) -> Callable[[NodeInfo], str | None]:
    def extract(info: NodeInfo) -> str | None:
        return info.node.labels.get(key) if info.node is not None else None

    return extract


def _compile(selector: Mapping[str, Any] | None, namespace: str) -> PodQuery | None:
    if selector is None or counts_nothing(selector):
        return None
    try:
        matcher: LabelMatcher = compile_label_selector(selector)
    except SelectorError:
        return None
    return namespace_query(namespace, selector, matcher)


def whole(score: float) -> float:
    """A raw score rounded as Go's ``math.Round`` rounds a non-negative one (halves up)."""
    return float(math.floor(score + 0.5))


def soft_constraints(pod: PodInfo) -> list[Constraint]:
    out: list[Constraint] = []
    for raw in pod.topology_spread:
        if raw.get("whenUnsatisfiable") != SCHEDULE_ANYWAY:
            continue
        selector = constraint_selector(raw, pod.labels)
        out.append(
            Constraint(
                topology_key=raw.get("topologyKey") or "",
                max_skew=int(raw.get("maxSkew") or 1),
                query=_compile(selector, pod.namespace),
                honor_node_affinity=(raw.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_taints=(raw.get("nodeTaintsPolicy") or "Ignore") == HONOR,
                counted=canonical_json(selector),
            )
        )
    return out


def system_default_constraints(query: PodQuery) -> list[Constraint]:
    """kube-scheduler's default constraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway,
    the default inclusion policies) counting the pods ``query`` selects."""
    return [
        Constraint(HOSTNAME_LABEL, 3, query, honor_node_affinity=True, honor_taints=False, counted=query),
        Constraint(ZONE_LABEL, 5, query, honor_node_affinity=True, honor_taints=False, counted=query),
    ]


def count_matching(node: NodeInfo, query: PodQuery | None) -> int:
    """Live (not terminating) pods on ``node`` the constraint's selector picks."""
    if query is None:
        return 0
    return query.count(node, live_only=True)


def _has_all_keys(labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def _required_affinity(pod: PodInfo) -> tuple[LabelMatcher, NodeMatcher | None]:
    terms = required_node_affinity_terms(pod.affinity)
    return compile_map_selector(pod.node_selector), (None if terms is None else compile_node_selector_terms(terms))


def _tally_key(pod: PodInfo, state: SpreadState) -> tuple[Any, ...]:
    """Everything ``_contribution`` reads besides the node: pods of one workload share it."""
    constraints = state.constraints
    return (
        "spread.score",
        pod.namespace,  # each selector is scoped to it
        state.require_all,
        tuple((c.topology_key, c.counted, c.honor_node_affinity, c.honor_taints) for c in constraints),
        eligibility_key(pod, any(c.honor_node_affinity for c in constraints), any(c.honor_taints for c in constraints)),
    )


def _contribution(pod: PodInfo, state: SpreadState) -> Callable[[NodeInfo], Contribution]:
    """One node's matching pods per counted constraint and domain, when the node passes the
    constraint's inclusion policies: an item ``(constraint index, domain, "")`` per pod."""
    constraints = state.constraints
    require_all = state.require_all
    tolerations = pod.tolerations
    matchers: list[tuple[LabelMatcher, NodeMatcher | None]] = []  # compiled on first use: a cached tally needs none

    def contribution(info: NodeInfo) -> Contribution:
        facts = info.node
        if facts is None:
            return ()
        labels = facts.labels
        if require_all and not _has_all_keys(labels, constraints):
            return ()
        out: list[tuple[Any, str, str]] = []
        for index, c in enumerate(constraints):
            query = c.query
            key = c.topology_key
            if key == HOSTNAME_LABEL or query is None:
                continue
            value = labels.get(key) if require_all else labels.get(key, "")
            if value is None:
                continue
            if c.honor_node_affinity:
                if not matchers:
                    matchers.append(_required_affinity(pod))
                node_selector, affinity = matchers[0]
                if not (node_selector(labels) and (affinity is None or affinity(info.name, labels))):
                    continue
            if c.honor_taints and first_untolerated_taint(facts.taints, tolerations, _DO_NOT_SCHEDULE_EFFECTS):
                continue
            matching = query.count(info, live_only=True)
            if matching:
                out.extend([(index, value, "")] * matching)
        return tuple(out)

    return contribution


class TopologySpreadScorer:
    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> SpreadState | None:
        if not nodes:
            return None
        require_all = True
        if pod.topology_spread:
            constraints = soft_constraints(pod)
        else:
            query = default_query(pod, snapshot)
            constraints = system_default_constraints(query) if query is not None else []
            require_all = False
        if not constraints:
            return None
        summary = summary_of(snapshot, ctx)
        state = SpreadState(pod.namespace, constraints, require_all=require_all)
        state.values = [summary.column(("label", c.topology_key), _label_of(c.topology_key)) for c in constraints]
        domains: list[set[str]] = [set() for _ in constraints]
        names = state.names = [info.name for info in nodes]
        ignored = state.ignored
        found = state.found = [list(map(column.get, names)) for column in state.values]
        state.nodes = nodes
        if require_all:
            for values in found:
                if None in values:
                    ignored.update(compress(names, map(is_, values, repeat(None))))
        pair_counts = state.pair_counts
        for i, c in enumerate(constraints):
            key = c.topology_key
            if key == HOSTNAME_LABEL:
                continue
            domain = domains[i]
            if ignored:  # only the values of candidates that have every key
                pairs = zip(names, found[i], strict=True)
                domain.update(v for name, v in pairs if v is not None and name not in ignored)
            elif not require_all:  # a candidate without the key stands for the domain ''
                domain.update("" if v is None else v for v in found[i])
            else:
                domain.update(cast(list[str], found[i]))
            for value in domain:
                pair_counts[(key, value)] = 0
        for i, c in enumerate(constraints):
            size = len(nodes) - len(state.ignored) if c.topology_key == HOSTNAME_LABEL else len(domains[i])
            c.weight = math.log(size + 2)
        if state.pair_counts:
            self._count_domains(pod, snapshot, state, summary)
        return state

    @staticmethod
    def _count_domains(pod: PodInfo, snapshot: Snapshot, state: SpreadState, summary: ClusterSummary) -> None:
        """Matching pods per candidate domain, over every node the constraints include: read from the
        summary's tally of those counts per constraint (see ``_tally_key``)."""
        counted = [
            (i, c) for i, c in enumerate(state.constraints) if c.topology_key != HOSTNAME_LABEL and c.query is not None
        ]
        if not counted:
            return
        probes: set[LabelKey] | None = set()
        for _, c in counted:
            keys = cast(PodQuery, c.query).probe_keys
            if keys is None or probes is None:
                probes = None
            else:
                probes.update(keys)
        # Only nodes holding a pod with one of the selectors' indexed labels can contribute.
        among = None if probes is None else infos_named(snapshot.nodes, summary.names_with_any_label(probes))
        tally = summary.tally(_tally_key(pod, state), _contribution(pod, state), among)
        counts = state.pair_counts
        for i, c in counted:
            per_value = tally.counts.get(i)
            if not per_value:
                continue
            key = c.topology_key
            for pair in counts:
                if pair[0] == key:
                    counts[pair] += per_value.get(pair[1], 0)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or node.node is None or node.name in state.ignored:
            return 0.0
        labels = node.node.labels
        total = 0.0
        for c in state.constraints:
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == HOSTNAME_LABEL:
                count = count_matching(node, c.query)
            else:
                count = state.pair_counts.get((c.topology_key, value), 0)
            total += count * c.weight + (c.max_skew - 1)
        return whole(total)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return (0.0, 0.0) if state is None else None  # no ScheduleAnyway constraint: skipped

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        """``score`` for each node, reading topology values from the state's columns."""
        if state is None:
            return [0.0] * len(nodes)
        ignored: set[str] = state.ignored
        pair_counts: dict[tuple[str, str], int] = state.pair_counts
        constraints: list[Constraint] = state.constraints
        if len(constraints) == 1 and constraints[0].topology_key != HOSTNAME_LABEL:
            # One domain constraint: each domain's score once, then one lookup per node.
            c = constraints[0]
            key, column = c.topology_key, state.values[0]
            by_value = {value: whole(count * c.weight + (c.max_skew - 1)) for (_, value), count in pair_counts.items()}
            if nodes is state.nodes:  # the values prepare read (a node without facts has none: 0)
                out = list(map(by_value.get, state.found[0], repeat(0.0)))
            else:
                out = [by_value.get(column.get(node.name), 0.0) if node.node is not None else 0.0 for node in nodes]
            if ignored:
                out = [0.0 if node.name in ignored else score for node, score in zip(nodes, out, strict=True)]
            return out
        parts = list(zip(constraints, state.values, strict=True))
        out = []
        append = out.append
        for node in nodes:
            name = node.name
            if name in ignored or node.node is None:
                append(0.0)
                continue
            total = 0.0
            for c, column in parts:
                value = column.get(name)
                if value is None:
                    continue
                key = c.topology_key
                count = count_matching(node, c.query) if key == HOSTNAME_LABEL else pair_counts.get((key, value), 0)
                total += count * c.weight + (c.max_skew - 1)
            append(whole(total))
        return out

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        if state is None:
            return constant(raw)
        ignored: set[str] = state.ignored
        scored = [score for name, score in raw.items() if name not in ignored]
        low = min(scored, default=0.0)
        high = max(scored, default=0.0)
        out: dict[str, float] = {}
        for name, score in raw.items():
            if name in ignored:
                out[name] = 0.0
            elif high <= 0:
                out[name] = float(MAX_PRIORITY)
            else:
                out[name] = MAX_PRIORITY * (high + low - score) / high
        return out

    def normalize_values(self, values: list[float], state: Any) -> list[float]:
        """``normalize`` over scores in the order of ``state.names``, with the same arithmetic."""
        if state is None:
            return [0.0] * len(values)
        ignored: set[str] = state.ignored
        kept = [name not in ignored for name in state.names] if ignored else None
        scored = values if kept is None else list(compress(values, kept))
        low = min(scored, default=0.0)
        high = max(scored, default=0.0)
        if high <= 0:
            out = [float(MAX_PRIORITY)] * len(values)
        else:
            base = high + low
            out = [MAX_PRIORITY * (base - score) / high for score in values]
        if kept is not None:
            out = [score if keep else 0.0 for score, keep in zip(out, kept, strict=True)]
        return out
