"""NodePreferAvoidPods: keep a controller's pods off nodes whose annotation asks to avoid them.

The node annotation ``scheduler.alpha.kubernetes.io/preferAvoidPods`` lists pod signatures
(controller kind and uid). A pod owned by a listed ReplicationController or ReplicaSet
scores 0 there, every other pod and node MAX. An annotation that does not parse is ignored.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from extenders.model import PREFER_AVOID_PODS_ANNOTATION, NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext, summary_of
from extenders.plugins.helper.normalize import clamp, clamp_values
from extenders.snapshot import Snapshot

_AVOIDABLE_KINDS = frozenset({"ReplicationController", "ReplicaSet"})
_ANNOTATED = "node-prefer-avoid-pods.annotated"  # ClusterSummary.names_where key


def _has_annotation(info: NodeInfo) -> bool:
    facts = info.node
    return facts is not None and bool(facts.annotations.get(PREFER_AVOID_PODS_ANNOTATION))


@lru_cache(maxsize=1024)
def avoided_controllers(annotation: str) -> frozenset[tuple[str, str]]:
    """(kind, uid) of every controller the annotation names; empty when it does not parse."""
    try:
        doc = json.loads(annotation)
        entries = doc.get("preferAvoidPods") or []
        out: set[tuple[str, str]] = set()
        for entry in entries:
            controller = (entry.get("podSignature") or {}).get("podController") or {}
            kind, uid = str(controller.get("kind") or ""), str(controller.get("uid") or "")
            if kind and uid:
                out.add((kind, uid))
        return frozenset(out)
    except (ValueError, AttributeError, TypeError):
        return frozenset()


class NodePreferAvoidPodsScorer:
    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[str, str] | None:
        owner = pod.owner
        if owner is None or owner.kind not in _AVOIDABLE_KINDS:
            return None
        return (owner.kind, owner.uid)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or node.node is None:
            return float(MAX_PRIORITY)
        annotation = node.node.annotations.get(PREFER_AVOID_PODS_ANNOTATION)
        if annotation and state in avoided_controllers(annotation):
            return 0.0
        return float(MAX_PRIORITY)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        """MAX everywhere unless the pod has an avoidable owner and a candidate carries the annotation."""
        if state is not None:
            annotated = summary_of(snapshot, ctx).names_where(_ANNOTATED, _has_annotation)
            if annotated and not annotated.isdisjoint([node.name for node in nodes]):
                return None
        return (float(MAX_PRIORITY), float(MAX_PRIORITY))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)

    def normalize_values(self, values: list[float], state: Any) -> list[float]:
        return clamp_values(values)
