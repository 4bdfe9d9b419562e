"""The extender verbs in scheduling terms: ``Scheduler`` runs filter, prioritize, preempt, bind and
explain over the shared snapshot and keeps a scheduling cycle's work for the pod's next verb.

It takes and gives typed domain objects (PodInfo, NodeFacts, the outcomes below); the wire format is
the web layer's.
"""

from extenders.scheduling.cycle import CYCLE_SNAPSHOT_SECONDS
from extenders.scheduling.outcomes import CyclePod, FilterOutcome, NodeScores, SnapshotUnavailable, Unevaluable
from extenders.scheduling.scheduler import Scheduler

__all__ = [
    "CYCLE_SNAPSHOT_SECONDS",
    "CyclePod",
    "FilterOutcome",
    "NodeScores",
    "Scheduler",
    "SnapshotUnavailable",
    "Unevaluable",
]
