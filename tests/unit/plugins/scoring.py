"""Scoring with one plug-in by name over candidate nodes, as the engine does it, for the plug-in tests."""

from __future__ import annotations

from typing import Any

from extenders.features import NEWEST, Features
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot

CTX = ScoringContext(resource_weights={"cpu": 1, "memory": 1})
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def run(
    name: str,
    incoming: PodInfo,
    nodes: list[NodeInfo],
    extra: list[NodeInfo] | None = None,
    *,
    ctx: ScoringContext = CTX,
    tables: dict[str, Any] | None = None,
    features: Features = NEWEST,
) -> tuple[dict[str, float], dict[str, float]]:
    """Raw and normalised scores of the candidates ``nodes``; ``extra`` nodes are in the snapshot only,
    ``tables`` are its other tables by attribute (``services``, ``replica_sets``, ...) and ``features``
    the kube-scheduler release it follows."""
    priority = SCORERS[name]
    snapshot = Snapshot(nodes={n.name: n for n in [*nodes, *(extra or [])]}, objects=tables or {}, features=features)
    state = priority.prepare(incoming, snapshot, nodes, ctx)
    raw = {n.name: priority.score(incoming, n, state, ctx) for n in nodes}
    return raw, priority.normalize(raw, state)
