"""MatchNodeSelector: kube-scheduler's NodeAffinity filter (nodeSelector AND required affinity).

Both must hold; required terms are ORed, the expressions inside a term ANDed, and a
required affinity with an empty term list matches no node. Unresolvable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.labels import (
    NodeMatcher,
    compile_map_selector,
    compile_node_selector_terms,
    required_node_affinity_terms,
)
from extenders.model import NodeInfo, PodInfo
from extenders.predicates.base import FIT, SKIP, Verdict, register
from extenders.snapshot import Snapshot

NAME = "MatchNodeSelector"
REASON = "node(s) didn't match Pod's node affinity/selector"
_FAIL = Verdict(False, REASON, unresolvable=True)


def compile_required_node_affinity(pod: PodInfo) -> NodeMatcher | None:
    """The pod's nodeSelector and required node affinity as one matcher; None when neither is set."""
    terms = required_node_affinity_terms(pod.affinity)
    if not pod.node_selector and terms is None:
        return None
    map_match = compile_map_selector(pod.node_selector)
    if terms is None:
        return lambda _name, labels: map_match(labels)
    terms_match = compile_node_selector_terms(terms)
    if not pod.node_selector:
        return terms_match

    def both(name: str, labels: Mapping[str, str]) -> bool:
        return map_match(labels) and terms_match(name, labels)

    return both


class MatchNodeSelector:
    name = NAME

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        matcher = compile_required_node_affinity(pod)
        return SKIP if matcher is None else matcher

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        return FIT if state(node.name, node.labels) else _FAIL


register(MatchNodeSelector())
