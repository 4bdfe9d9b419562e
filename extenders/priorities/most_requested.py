"""MostRequested: prefer the fullest nodes (NodeResourcesFit MostAllocated), i.e. bin packing.

Per resource ``requested * MAX / allocatable`` (over-commit counts as full), averaged with
the policy's resource weights; the better choice for GPU fleets, where fragmentation costs.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import ScoringContext, register
from extenders.priorities.normalize import clamp
from extenders.priorities.resource_terms import (
    ResourceTerm,
    resource_rows,
    resource_terms,
    used_share,
    used_share_scores,
    weighted_resource_score,
)
from extenders.snapshot import Snapshot


class MostRequested:
    name = "MostRequested"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...]:
        return resource_terms(pod, ctx.resource_weights, nonzero=True)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        return weighted_resource_score(node, state, used_share)

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        if ctx.summary is None:
            return [self.score(pod, node, state, ctx) for node in nodes]
        return used_share_scores(nodes, state, resource_rows(ctx.summary, state))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)


register(MostRequested())
