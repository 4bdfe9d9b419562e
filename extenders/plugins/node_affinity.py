"""Node affinity: kube-scheduler's NodeAffinity plug-in, its filter and its score.

Filter (MatchNodeSelector): the pod's nodeSelector AND its required node affinity must hold;
required terms are ORed, the expressions inside a term ANDed, and a required affinity with an
empty term list matches no node. Unresolvable.

Score (NodeAffinity): the sum of the weights of the matching
``preferredDuringSchedulingIgnoredDuringExecution`` terms, normalised so the best node gets
MAX. A pod without preferred terms scores 0 everywhere (the plugin skips it).
"""

from __future__ import annotations

from typing import Any

from extenders.labels import NodeMatcher, compile_node_selector_term, compile_required_node_affinity
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, ConstantScore, NodeFamily, ScoringContext, Verdict
from extenders.plugins.helper.normalize import by_max
from extenders.snapshot import Snapshot

REASON = "node(s) didn't match Pod's node affinity/selector"
_FAIL = Verdict(False, REASON, unresolvable=True)


class NodeAffinityFilter:
    node_families = (NodeFamily.NAME, NodeFamily.LABELS)  # matchFields reads the name

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        matcher = compile_required_node_affinity(pod)
        return SKIP if matcher is None else matcher

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        return FIT if state(node.name, node.labels) else _FAIL


PreferredTerms = tuple[tuple[int, NodeMatcher], ...]


def preferred_terms(pod: PodInfo) -> PreferredTerms:
    """(weight, matcher) for each preferred term; zero-weight terms count for nothing."""
    node_affinity = pod.affinity.get("nodeAffinity") or {}
    out: list[tuple[int, NodeMatcher]] = []
    for term in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        weight = int(term.get("weight") or 0)
        if weight:
            out.append((weight, compile_node_selector_term(term.get("preference"))))
    return tuple(out)


class NodeAffinityScorer:
    node_families = (NodeFamily.NAME, NodeFamily.LABELS)

    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> PreferredTerms:
        return preferred_terms(pod)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if not state or node.node is None:
            return 0.0
        name = node.name
        labels = node.node.labels
        total = 0
        for weight, matches in state:
            if matches(name, labels):
                total += weight
        return float(total)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return None if state else (0.0, 0.0)  # no preferred terms: 0 everywhere

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return by_max(raw)
