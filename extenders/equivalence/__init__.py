"""The equivalence-class cache: verdicts of node-local filters, per class of identical pods.

Pods that agree on every field a predicate reads (``classes``) get the same verdict on a node
whose relevant parts (``fingerprints``) did not change, so a replica computes each such verdict
once (``cache``). Filters that read other nodes (inter-pod affinity, topology spread) are always
evaluated over the current snapshot.
"""

from extenders.equivalence.cache import CacheConfig, ClassMemo, EquivalenceCache, FilterEntry
from extenders.equivalence.classes import CLASS_FIELDS, IGNORED_FIELDS, equivalence_class
from extenders.equivalence.fingerprints import fingerprint_key, fingerprints

__all__ = [
    "CLASS_FIELDS",
    "IGNORED_FIELDS",
    "CacheConfig",
    "ClassMemo",
    "EquivalenceCache",
    "FilterEntry",
    "equivalence_class",
    "fingerprint_key",
    "fingerprints",
]
