"""The preempt verb: which of kube-scheduler's candidate nodes also work for this extender, and with
which victims.

``victims`` decides each candidate node on its own (what only the extender counts: resources
kube-scheduler ignores, PDBs, the pods nominated there); ``gangs`` then applies the gang rules across
the candidates (a gang is one victim; a gang member preempts only when its gang can complete).
"""

from extenders.gang.eviction import GangEviction
from extenders.preemption.decide import MetaVictims, Preemption, process_preemption
from extenders.preemption.gangs import (
    RULE_GANG_ASSEMBLING,
    RULE_GANG_AVOIDABLE,
    RULE_GANG_NOT_BEST,
    RULE_GANG_NOT_LOWER,
)
from extenders.preemption.victims import (
    RULE_ALREADY_FREED,
    RULE_CANNOT_FIT,
    RULE_NO_LOWER_PRIORITY,
    RULE_NO_VICTIMS,
    RULE_UNKNOWN_NODE,
    RULE_UNKNOWN_VICTIM,
    importance_key,
    rank_key,
)

__all__ = [
    "RULE_ALREADY_FREED",
    "RULE_CANNOT_FIT",
    "RULE_GANG_ASSEMBLING",
    "RULE_GANG_AVOIDABLE",
    "RULE_GANG_NOT_BEST",
    "RULE_GANG_NOT_LOWER",
    "RULE_NO_LOWER_PRIORITY",
    "RULE_NO_VICTIMS",
    "RULE_UNKNOWN_NODE",
    "RULE_UNKNOWN_VICTIM",
    "GangEviction",
    "MetaVictims",
    "Preemption",
    "importance_key",
    "process_preemption",
    "rank_key",
]
