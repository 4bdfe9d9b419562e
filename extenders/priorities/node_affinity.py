"""NodeAffinity: prefer nodes matching the pod's preferred node affinity terms.

Raw score is the sum of the weights of the matching
``preferredDuringSchedulingIgnoredDuringExecution`` terms; normalised so the best node
gets MAX. A pod without preferred terms scores 0 everywhere (the plugin skips it).
"""

from __future__ import annotations

from typing import Any

from extenders.labels import NodeMatcher, compile_node_selector_term
from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import ConstantScore, ScoringContext, register
from extenders.priorities.normalize import by_max
from extenders.snapshot import Snapshot

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


class NodeAffinity:
    name = "NodeAffinity"

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


register(NodeAffinity())
