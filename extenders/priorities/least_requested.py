"""LeastRequested: prefer nodes with the most free capacity (NodeResourcesFit LeastAllocated).

Per resource ``(allocatable - requested) * MAX / allocatable`` with the scorers' non-zero
cpu/memory requests, averaged with the policy's resource weights. Spreads load.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import MAX_PRIORITY, ScoringContext, register
from extenders.priorities.normalize import clamp
from extenders.priorities.resource_terms import NONZERO_CPU, PLAIN, ResourceTerm, resource_terms
from extenders.snapshot import Snapshot


class LeastRequested:
    name = "LeastRequested"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...]:
        return resource_terms(pod, ctx.resource_weights, nonzero=True)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if node.node is None:
            return 0.0
        allocatable = node.node.allocatable
        total = 0.0
        weight_sum = 0
        for name, weight, pod_request, kind in state:
            capacity = allocatable.get(name, 0)
            if capacity <= 0:
                continue  # the node does not offer this resource: not scored
            if kind == PLAIN:
                requested = node.requested.get(name, 0) + pod_request
            else:
                requested = (node.nonzero_cpu if kind == NONZERO_CPU else node.nonzero_memory) + pod_request
            if requested <= capacity:
                total += (capacity - requested) * MAX_PRIORITY / capacity * weight
            weight_sum += weight
        return total / weight_sum if weight_sum else 0.0

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)


register(LeastRequested())
