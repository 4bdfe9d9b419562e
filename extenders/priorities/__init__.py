"""Scoring priorities; importing this package registers every one of them in ``PRIORITIES``.

Conventions shared by every priority (semantics follow today's kube-scheduler score plugins):
- raw and normalised scores are floats; normalised ones are in 0..MAX_PRIORITY (10) with no
  intermediate integer truncation: the engine rounds once, after the weighted sum;
- where the plugin would *skip* a pod (nothing to score), every candidate gets the same
  score (0), so the priority does not change the ranking;
- ``prepare`` does the per-pod work once; ``score`` only reads precomputed state and the node.
"""

from extenders.priorities import (
    balanced_allocation,
    image_locality,
    inter_pod_affinity,
    least_requested,
    most_requested,
    node_affinity,
    node_prefer_avoid_pods,
    pod_topology_spread,
    selector_spread,
    taint_toleration,
)
from extenders.priorities.base import MAX_PRIORITY, PRIORITIES, Priority, ScoringContext, register

__all__ = [
    "MAX_PRIORITY",
    "PRIORITIES",
    "Priority",
    "ScoringContext",
    "balanced_allocation",
    "image_locality",
    "inter_pod_affinity",
    "least_requested",
    "most_requested",
    "node_affinity",
    "node_prefer_avoid_pods",
    "pod_topology_spread",
    "register",
    "selector_spread",
    "taint_toleration",
]
