"""LeastRequested and MostRequested: NodeResourcesFit's LeastAllocated and MostAllocated scoring.

Per resource, ``(allocatable - requested) * MAX / allocatable`` (least: spreads load) or
``requested * MAX / allocatable`` (most: bin packing, over-commit counting as full; the better
choice for GPU fleets, where fragmentation costs), with the scorers' non-zero cpu/memory
requests, averaged with the policy's resource weights. One scorer, registered once per strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import NodeFamily, ScoringContext
from extenders.plugins.helper.normalize import clamp, clamp_values
from extenders.plugins.node_resources.terms import (
    ResourceTerm,
    free_share,
    free_share_scores,
    resource_rows,
    resource_terms,
    used_share,
    used_share_scores,
    weighted_resource_score,
)
from extenders.snapshot import Snapshot

Share = Callable[[int, int], float]
Rows = dict[str, tuple[int, ...]]
ShareScores = Callable[[list[NodeInfo], tuple[ResourceTerm, ...], Rows], list[float]]


class RequestedScorer:
    node_families = (NodeFamily.RESOURCES,)

    def __init__(self, share: Share, share_scores: ShareScores) -> None:
        self._share = share
        self._share_scores = share_scores

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> tuple[ResourceTerm, ...]:
        return resource_terms(pod, ctx.resource_weights, nonzero=True)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        return weighted_resource_score(node, state, self._share)

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        if ctx.summary is None:
            return [self.score(pod, node, state, ctx) for node in nodes]
        return self._share_scores(nodes, state, resource_rows(ctx.summary, state))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return clamp(raw)

    def normalize_values(self, values: list[float], state: Any) -> list[float]:
        return clamp_values(values)


def least_requested() -> RequestedScorer:
    return RequestedScorer(free_share, free_share_scores)


def most_requested() -> RequestedScorer:
    return RequestedScorer(used_share, used_share_scores)
