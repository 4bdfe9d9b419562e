"""The equivalence-class cache: verdicts of node-local filters and raw scores of node-local
scorers, per class of identical pods.

Pods that agree on every field a predicate or priority reads (``classes``) get the same verdict
and raw score on a node whose relevant parts (``fingerprints``) did not change, so a replica
computes each once (``cache``). Plug-ins that read other nodes (inter-pod affinity, topology
spread, image locality) are always evaluated over the current snapshot, and scores are always
normalised over the current candidates.
"""

from extenders.equivalence.cache import CacheConfig, ClassMemo, EquivalenceCache, FilterEntry, ScoreEntry
from extenders.equivalence.classes import CLASS_FIELDS, IGNORED_FIELDS, equivalence_class
from extenders.equivalence.fingerprints import fingerprint_key, fingerprints

__all__ = [
    "CLASS_FIELDS",
    "IGNORED_FIELDS",
    "CacheConfig",
    "ClassMemo",
    "EquivalenceCache",
    "FilterEntry",
    "ScoreEntry",
    "equivalence_class",
    "fingerprint_key",
    "fingerprints",
]
