"""PodTopologySpread (scoring): prefer domains holding fewer matching pods, for the pod's
``whenUnsatisfiable: ScheduleAnyway`` constraints (DoNotSchedule ones are the filter's job).

As today's plugin: for each constraint, count the pods matching its selector (same namespace,
not terminating) per topology domain over every node that passes the constraint's node
inclusion policies; a candidate's raw score is ``Σ count * log(domains + 2) + (maxSkew - 1)``.
Candidates missing a constraint's topology key are ignored (score 0). Normalisation maps the
lowest raw score to MAX: ``MAX * (max + min - raw) / max``.

A pod without ScheduleAnyway constraints is skipped by the plugin, i.e. contributes nothing:
every node scores 0. (kube-scheduler's system-default constraints are not applied; the
SelectorSpread priority covers default spreading by owner.)

Counting reads the nodes' label index (``extenders.predicates.pod_query``), and only nodes
holding a pod with the selector's indexed label are visited (``cluster_summary``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extenders.labels import (
    LabelMatcher,
    NodeMatcher,
    SelectorError,
    compile_label_selector,
    compile_map_selector,
    compile_node_selector_terms,
    first_untolerated_taint,
    required_node_affinity_terms,
)
from extenders.model import NodeInfo, PodInfo
from extenders.predicates.cluster_summary import ClusterSummary, infos_named
from extenders.predicates.pod_query import PodQuery, namespace_query
from extenders.priorities.base import MAX_PRIORITY, ScoringContext, register, summary_of
from extenders.priorities.normalize import constant
from extenders.snapshot import Snapshot

HOSTNAME_LABEL = "kubernetes.io/hostname"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
_DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(slots=True)
class Constraint:
    topology_key: str
    max_skew: int
    query: PodQuery | None  # None: an empty or missing selector, which counts no pods
    honor_node_affinity: bool
    honor_taints: bool
    weight: float = 0.0  # log(number of candidate domains + 2), set in prepare


@dataclass(slots=True)
class SpreadState:
    namespace: str
    constraints: list[Constraint]
    ignored: set[str] = field(default_factory=set)
    pair_counts: dict[tuple[str, str], int] = field(default_factory=dict)


def _selector_with_label_keys(constraint: Mapping[str, Any], pod_labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The constraint's selector with ``matchLabelKeys`` folded in as ``key In (pod's value)``."""
    selector = constraint.get("labelSelector")
    keys = [k for k in constraint.get("matchLabelKeys") or [] if k in pod_labels]
    if selector is None or not keys:
        return selector
    merged = dict(selector)
    merged["matchExpressions"] = [
        *(selector.get("matchExpressions") or []),
        *({"key": k, "operator": "In", "values": [pod_labels[k]]} for k in keys),
    ]
    return merged


def _compile(selector: Mapping[str, Any] | None, namespace: str) -> PodQuery | None:
    if selector is None or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return None
    try:
        matcher: LabelMatcher = compile_label_selector(selector)
    except SelectorError:
        return None
    return namespace_query(namespace, selector, matcher)


def soft_constraints(pod: PodInfo) -> list[Constraint]:
    out: list[Constraint] = []
    for raw in pod.topology_spread:
        if raw.get("whenUnsatisfiable") != SCHEDULE_ANYWAY:
            continue
        out.append(
            Constraint(
                topology_key=raw.get("topologyKey") or "",
                max_skew=int(raw.get("maxSkew") or 1),
                query=_compile(_selector_with_label_keys(raw, pod.labels), pod.namespace),
                honor_node_affinity=(raw.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_taints=(raw.get("nodeTaintsPolicy") or "Ignore") == HONOR,
            )
        )
    return out


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


class PodTopologySpread:
    name = "PodTopologySpread"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> SpreadState | None:
        constraints = soft_constraints(pod)
        if not constraints or not nodes:
            return None
        state = SpreadState(pod.namespace, constraints)
        domains: list[set[str]] = [set() for _ in constraints]
        for info in nodes:
            labels = info.node.labels if info.node else None
            if labels is None or not _has_all_keys(labels, constraints):
                state.ignored.add(info.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == HOSTNAME_LABEL:
                    continue
                value = labels[c.topology_key]
                domains[i].add(value)
                state.pair_counts[(c.topology_key, value)] = 0
        for i, c in enumerate(constraints):
            size = len(nodes) - len(state.ignored) if c.topology_key == HOSTNAME_LABEL else len(domains[i])
            c.weight = math.log(size + 2)
        if state.pair_counts:
            self._count_domains(pod, snapshot, state, summary_of(snapshot, ctx))
        return state

    @staticmethod
    def _count_domains(pod: PodInfo, snapshot: Snapshot, state: SpreadState, summary: ClusterSummary) -> None:
        """Matching pods per candidate domain, over every node the constraints include."""
        node_selector, affinity = _required_affinity(pod)
        counts = state.pair_counts
        constraints = state.constraints
        for c in constraints:
            query = c.query
            if c.topology_key == HOSTNAME_LABEL or query is None:
                continue
            probes = query.probe_keys
            infos: Iterable[NodeInfo] = snapshot.nodes.values()
            if probes is not None:
                # Only nodes holding a pod with one of the selector's indexed labels can count.
                infos = infos_named(snapshot, summary.names_with_any_label(probes))
            key = c.topology_key
            for info in infos:
                facts = info.node
                if facts is None:
                    continue
                labels = facts.labels
                value = labels.get(key)
                if value is None or (key, value) not in counts or not _has_all_keys(labels, constraints):
                    continue
                if c.honor_node_affinity and not (
                    node_selector(labels) and (affinity is None or affinity(info.name, labels))
                ):
                    continue
                if c.honor_taints and first_untolerated_taint(facts.taints, pod.tolerations, _DO_NOT_SCHEDULE_EFFECTS):
                    continue
                counts[(key, value)] += query.count(info, live_only=True)

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
        return total

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


register(PodTopologySpread())
