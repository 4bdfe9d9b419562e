"""LeastRequested: prefer nodes with the most free capacity (NodeResourcesFit LeastAllocated).

Per resource ``(allocatable - requested) * MAX / allocatable`` with the scorers' non-zero
cpu/memory requests, averaged with the policy's resource weights. Spreads load.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import ScoringContext, register
from extenders.priorities.normalize import clamp
from extenders.priorities.resource_terms import (
    ResourceTerm,
    free_share,
    free_share_scores,
    resource_rows,
    resource_terms,
    weighted_resource_score,
)
from extenders.snapshot import Snapshot


class LeastRequested:
    name = "LeastRequested"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...]:
        return resource_terms(pod, ctx.resource_weights, nonzero=True)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        return weighted_resource_score(node, state, free_share)

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        if ctx.summary is None:
            return [self.score(pod, node, state, ctx) for node in nodes]
        return free_share_scores(nodes, state, resource_rows(ctx.summary, state))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)


register(LeastRequested())
