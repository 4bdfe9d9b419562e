"""A pod's equivalence class: a digest of every field a predicate or priority reads.

Stable across processes (a blake2b digest of a canonical encoding, keys sorted), independent
of the pod's name, uid, owner and annotations. Every ``PodInfo`` field is listed in exactly one
of the two tuples below, so a new field cannot be left out by accident (a test checks).
"""

from __future__ import annotations

from hashlib import blake2b

from extenders.canonical import canonical_json
from extenders.features import NEWEST, Features
from extenders.model import PodInfo

# What scheduling reads of the incoming pod.
CLASS_FIELDS: tuple[str, ...] = (
    "namespace",
    "labels",
    "node_name",  # spec.nodeName: the NodeName filter
    "priority",
    "preemption_policy",
    "requests",
    "nonzero_cpu",
    "nonzero_memory",
    "score_nonzero",
    "best_effort",
    "host_ports",
    "node_selector",
    "affinity",
    "tolerations",
    "topology_spread",
    "volumes",
    "images",
    "init_images",
    "volume_images",
)
# Identity and lifecycle: read by nothing that decides where the pod may go. ``owner`` is read by
# scorers that look at other nodes (SelectorSpread, NodePreferAvoidPods), which are not cached.
IGNORED_FIELDS: tuple[str, ...] = (
    "name",
    "uid",
    "annotations",
    "phase",
    "scheduler_name",
    "deletion_timestamp",
    "creation_timestamp",
    "start_time",
    "owner",
    "assumed",
    "nominated_node_name",  # read by the engine for the pods it adds, never for the incoming pod
    "native_group",  # read by the gang rules, which run outside the cached plug-ins
    "scheduling_gates",  # kube-scheduler filters no gated pod; read by the gang assembly gate alone
)


def equivalence_class(pod: PodInfo, features: Features = NEWEST) -> str:
    """The class digest (32 hex digits). How the followed release's plug-ins behave is part of it:
    the same pod may get other verdicts and scores under another release, and replicas share entries."""
    canonical = canonical_json({name: getattr(pod, name) for name in CLASS_FIELDS})
    digest = blake2b(canonical, digest_size=16)
    digest.update(features.behaviour.encode())
    return digest.hexdigest()
