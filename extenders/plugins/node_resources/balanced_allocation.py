"""BalancedResourceAllocation: prefer nodes whose resources fill up evenly.

Today's NodeResourcesBalancedAllocation: ``(1 - std) * MAX`` where std is the standard
deviation of the requested/allocatable fractions (each capped at 1) over the policy's
resources. Like the plugin it uses the *actual* requests (not the non-zero defaults), and
skips best-effort pods (nothing requested): those score 0 on every node, so a flood of
them is not piled onto one node.
"""

from __future__ import annotations

import math
from itertools import repeat
from operator import mul, sub, truediv
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, NodeFamily, ScoringContext
from extenders.plugins.helper.normalize import clamp, clamp_values
from extenders.plugins.node_resources.terms import (
    NONZERO_CPU,
    PLAIN,
    ResourceTerm,
    resource_columns,
    resource_rows,
    resource_terms,
)
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


class BalancedAllocationScorer:
    node_families = (NodeFamily.RESOURCES,)

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

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return (0.0, 0.0) if state is None else None  # best effort: skipped

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        """``score`` for each node, from the summary's resource rows, two resources inlined."""
        if state is None:
            return [0.0] * len(nodes)
        if ctx.summary is None:
            return [self.score(pod, node, state, ctx) for node in nodes]
        rows = resource_rows(ctx.summary, state)
        columns = resource_columns(rows, [node.name for node in nodes], state) if len(state) == 2 else None
        if columns is not None:
            # Two resources every node offers: (1 - |f0 - f1| / 2) * MAX with each fraction capped at 1.
            (capacity0, requested0, _), (capacity1, requested1, _) = columns
            first = map(min, map(truediv, requested0, capacity0), repeat(1.0))
            second = map(min, map(truediv, requested1, capacity1), repeat(1.0))
            std = map(truediv, map(abs, map(sub, first, second)), repeat(2))
            return list(map(mul, map(sub, repeat(1.0), std), repeat(MAX_PRIORITY)))
        indexed = [(2 * i, pod_request) for i, (_name, _weight, pod_request, _kind) in enumerate(state)]
        out: list[float] = []
        append = out.append
        sqrt = math.sqrt
        for node in nodes:
            row = rows.get(node.name)
            if row is None:
                append(0.0)
                continue
            fractions: list[float] = []
            for at, pod_request in indexed:
                capacity = row[at]
                if capacity <= 0:
                    continue
                fraction = (row[at + 1] + pod_request) / capacity
                fractions.append(fraction if fraction < 1.0 else 1.0)
            count = len(fractions)
            if count < 2:
                append(float(MAX_PRIORITY))
            elif count == 2:
                append((1.0 - abs(fractions[0] - fractions[1]) / 2) * MAX_PRIORITY)
            else:
                mean = sum(fractions) / count
                append((1.0 - sqrt(sum((f - mean) ** 2 for f in fractions) / count)) * MAX_PRIORITY)
        return out

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)

    def normalize_values(self, values: list[float], state: Any) -> list[float]:
        return clamp_values(values)
