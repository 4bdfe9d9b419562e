"""What a priority is, and the registry a policy picks priorities from by name.

A priority is the seed's map/reduce pair: ``score`` maps a node to a raw number,
``normalize`` reduces the raw numbers over the candidate list to 0..MAX_PRIORITY.
``prepare`` computes per-pod state over the whole snapshot once (PreScore).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from extenders.model import NodeInfo, PodInfo
from extenders.predicates.cluster_summary import ClusterSummary, summary_for
from extenders.snapshot import Snapshot

MAX_PRIORITY = 10  # extender/v1 MaxExtenderPriority


@dataclass(slots=True, frozen=True)
class ScoringContext:
    """Policy knobs some scorers read (resource weights, symmetric affinity weight)."""

    resource_weights: dict[str, int]
    hard_pod_affinity_symmetric_weight: int = 1
    # The snapshot's node-table summary, computed once per call by the engine; priorities
    # fall back to ``summary_of`` when called without one (tests, tools).
    summary: ClusterSummary | None = None


def summary_of(snapshot: Snapshot, ctx: ScoringContext) -> ClusterSummary:
    """``ctx.summary`` when the engine supplied it, else the snapshot's summary."""
    return ctx.summary if ctx.summary is not None else summary_for(snapshot)


class Priority(Protocol):
    """The map/reduce pair. The engine also uses two optional methods when a priority has them:

    ``constant(pod, snapshot, nodes, state, ctx) -> (raw, score) | None``: with the prepared
    state, ``(raw, score)`` when every node of ``nodes`` would get that raw and normalised
    score (the engine then skips ``score``/``normalize``), else None. Must be cheap.

    ``score_all(pod, nodes, state, ctx) -> list[float]``: ``score`` for each node, in order,
    in one loop (per-node calls dominate the cost of the cheap scorers).
    """

    name: str

    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> Any: ...

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float: ...

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        """Raw scores by node name -> scores in 0..MAX_PRIORITY."""
        ...


ConstantScore = tuple[float, float]  # (raw, normalised): what ``constant`` returns

PRIORITIES: dict[str, Priority] = {}


def register(priority: Priority) -> Priority:
    if priority.name in PRIORITIES:
        raise ValueError(f"priority {priority.name!r} registered twice")
    PRIORITIES[priority.name] = priority
    return priority
