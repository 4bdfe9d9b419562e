"""BalancedResourceAllocation: prefer nodes whose resources fill up evenly.

Today's NodeResourcesBalancedAllocation: ``(1 - std) * MAX`` where std is the standard
deviation of the requested/allocatable fractions (each capped at 1) over the policy's
resources. Like the plugin it uses the *actual* requests (not the non-zero defaults), and
skips best-effort pods (nothing requested): those score 0 on every node, so a flood of
them is not piled onto one node.
"""

from __future__ import annotations

import math
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import MAX_PRIORITY, ScoringContext, register
from extenders.priorities.normalize import clamp
from extenders.priorities.resource_terms import NONZERO_CPU, PLAIN, ResourceTerm, resource_terms
from extenders.snapshot import Snapshot


def balance_score(fractions: list[float]) -> float:
    """``(1 - std) * MAX`` of the usage fractions; fewer than two fractions are balanced."""
    count = len(fractions)
    if count < 2:
        return float(MAX_PRIORITY)
    if count == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    else:
        mean = sum(fractions) / count
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / count)
    return (1.0 - std) * MAX_PRIORITY


class BalancedResourceAllocation:
    name = "BalancedResourceAllocation"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...] | None:
        terms = resource_terms(pod, ctx.resource_weights, nonzero=False)
        if not any(pod_request for _, _, pod_request, _ in terms):
            return None  # best effort: the plugin skips the pod
        return terms

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or node.node is None:
            return 0.0
        allocatable = node.node.allocatable
        fractions: list[float] = []
        for name, _weight, pod_request, kind in state:
            capacity = allocatable.get(name, 0)
            if capacity <= 0:
                continue
            if kind == PLAIN:
                requested = node.requested.get(name, 0) + pod_request
            else:
                requested = (node.nonzero_cpu if kind == NONZERO_CPU else node.nonzero_memory) + pod_request
            fraction = requested / capacity
            fractions.append(fraction if fraction < 1.0 else 1.0)
        return balance_score(fractions)

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)


register(BalancedResourceAllocation())
