"""LeastRequested: prefer nodes with the most free capacity (NodeResourcesFit LeastAllocated).

Per resource ``(allocatable - requested) * MAX / allocatable`` with the scorers' non-zero
cpu/memory requests, averaged with the policy's resource weights. Spreads load.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import MAX_PRIORITY, ScoringContext, register
from extenders.priorities.normalize import clamp
from extenders.priorities.resource_terms import ResourceTerm, resource_terms, weighted_resource_score
from extenders.snapshot import Snapshot


def _free_share(requested: int, capacity: int) -> float:
    return (capacity - requested) * MAX_PRIORITY / capacity if requested <= capacity else 0.0


class LeastRequested:
    name = "LeastRequested"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...]:
        return resource_terms(pod, ctx.resource_weights, nonzero=True)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        return weighted_resource_score(node, state, _free_share)

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)


register(LeastRequested())
