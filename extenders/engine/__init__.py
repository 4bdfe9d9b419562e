"""Runs a policy's predicates and priorities over a snapshot: filter, prioritize, explain.

Pure functions, no I/O; the names callers use are re-exported here.
"""

from extenders.engine.explanation import explain
from extenders.engine.filtering import filter_nodes, filter_prepared, fits
from extenders.engine.nominated import nominated_to_add, with_pods, without_own_reservation, without_pods
from extenders.engine.prepared import PreparedPod, prepare_pod
from extenders.engine.results import NODE_NOT_FOUND, FilterResult, combine
from extenders.engine.score_cache import ScoreCounts
from extenders.engine.scoring import prioritize_nodes, prioritize_values

__all__ = [
    "NODE_NOT_FOUND",
    "FilterResult",
    "PreparedPod",
    "ScoreCounts",
    "combine",
    "explain",
    "filter_nodes",
    "filter_prepared",
    "fits",
    "nominated_to_add",
    "prepare_pod",
    "prioritize_nodes",
    "prioritize_values",
    "with_pods",
    "without_own_reservation",
    "without_pods",
]
