"""BalancedResourceAllocation: prefer nodes whose resources fill up evenly.

Today's NodeResourcesBalancedAllocation: ``(1 - std) * MAX`` where std is the standard
deviation of the requested/allocatable fractions (each capped at 1) over the policy's
resources. Like the plugin it uses the *actual* requests (not the non-zero defaults), and
skips best-effort pods (nothing requested): those score 0 on every node, so a flood of
them is not piled onto one node (from 1.33; older releases scored them on the nodes' balance as
it is). From 1.36 the score is how much the pod evens a node out: ``change_score`` of the balance
with and without it (extenders.features).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
from extenders.snapshot.summary import ClusterSummary


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


@dataclass(slots=True, frozen=True)
class BalanceState:
    terms: tuple[ResourceTerm, ...]  # the pod's requests to score
    # The same resources with nothing requested, when the followed release scores how the pod changes
    # a node's balance (1.36 on): the node's balance as it is; None when it scores the balance with the pod.
    without: tuple[ResourceTerm, ...] | None = None


def change_score(with_pod: float, without_pod: float) -> float:
    """1.36's score of the balance a pod leaves: three quarters of ``MAX`` when it changes nothing,
    more when it evens the node out, less when it tilts it (never below a quarter)."""
    half = MAX_PRIORITY / 2
    return half + (half + with_pod - without_pod) / 2


class BalancedAllocationScorer:
    node_families = (NodeFamily.RESOURCES,)

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> BalanceState | None:
        terms = resource_terms(pod, ctx.resource_weights, nonzero=False)
        features = snapshot.features
        if features.balanced_allocation_skips_best_effort and not any(t[2] for t in terms):
            return None  # best effort: the plugin skips the pod
        if features.balanced_allocation_scores_change:
            return BalanceState(terms, tuple((name, weight, 0, kind) for name, weight, _, kind in terms))
        return BalanceState(terms)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or node.node is None:
            return 0.0
        with_pod = self._balance(node, state.terms)
        if state.without is None:
            return with_pod
        return change_score(with_pod, self._balance(node, state.without))

    @staticmethod
    def _balance(node: NodeInfo, terms: tuple[ResourceTerm, ...]) -> float:
        assert node.node is not None
        allocatable = node.node.allocatable
        fractions: list[float] = []
        for name, _weight, pod_request, kind in terms:
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
        """``score`` for each node, from the summary's resource rows."""
        if state is None:
            return [0.0] * len(nodes)
        if ctx.summary is None:
            return [self.score(pod, node, state, ctx) for node in nodes]
        with_pod = self._balance_all(nodes, state.terms, ctx.summary)
        if state.without is None:
            return with_pod
        without = self._balance_all(nodes, state.without, ctx.summary)
        return [
            change_score(w, wo) if node.node is not None else 0.0
            for node, w, wo in zip(nodes, with_pod, without, strict=True)
        ]

    @staticmethod
    def _balance_all(nodes: list[NodeInfo], terms: tuple[ResourceTerm, ...], summary: ClusterSummary) -> list[float]:
        """``_balance`` for each node, two resources inlined."""
        rows = resource_rows(summary, terms)
        columns = resource_columns(rows, [node.name for node in nodes], terms) if len(terms) == 2 else None
        if columns is not None:
            # Two resources every node offers: (1 - |f0 - f1| / 2) * MAX with each fraction capped at 1.
            (capacity0, requested0, _), (capacity1, requested1, _) = columns
            first = map(min, map(truediv, requested0, capacity0), repeat(1.0))
            second = map(min, map(truediv, requested1, capacity1), repeat(1.0))
            std = map(truediv, map(abs, map(sub, first, second)), repeat(2))
            return list(map(mul, map(sub, repeat(1.0), std), repeat(MAX_PRIORITY)))
        indexed = [(2 * i, pod_request) for i, (_name, _weight, pod_request, _kind) in enumerate(terms)]
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
