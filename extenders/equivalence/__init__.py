"""The equivalence-class cache: verdicts of node-local filters and raw scores of node-local
scorers, per class of identical pods.

Pods that agree on every field a predicate or priority reads (``classes``) get the same verdict
and raw score on a node whose relevant parts (``fingerprints``) did not change, so a replica
computes each once (``cache``); what one replica computed, others take from Redis for a class new
to them (``shared``, entries checked against digests of the node parts, ``packing``). Plug-ins
that read other nodes (inter-pod affinity, topology spread, image locality) are always evaluated
over the current snapshot, and scores are always normalised over the current candidates.
"""

from extenders.equivalence.cache import (
    FILTER,
    CacheConfig,
    ClassMemo,
    Computed,
    EquivalenceCache,
    FilterEntry,
    ScoreEntry,
)
from extenders.equivalence.classes import CLASS_FIELDS, IGNORED_FIELDS, equivalence_class
from extenders.equivalence.fingerprints import digests, fingerprint_key, fingerprints

__all__ = [
    "CLASS_FIELDS",
    "FILTER",
    "IGNORED_FIELDS",
    "CacheConfig",
    "ClassMemo",
    "Computed",
    "EquivalenceCache",
    "FilterEntry",
    "ScoreEntry",
    "digests",
    "equivalence_class",
    "fingerprint_key",
    "fingerprints",
]
