"""Importing this package registers every predicate in ``extenders.predicates.base.PREDICATES``."""

from extenders.predicates import (
    conditions,
    disk_conflict,
    host,
    interpod_affinity,
    node_selector,
    ports,
    pressure,
    resources,
    taints,
    topology_spread,
    unschedulable,
)
from extenders.predicates.base import FIT, PREDICATES, SKIP, Predicate, Verdict

__all__ = [
    "FIT",
    "PREDICATES",
    "SKIP",
    "Predicate",
    "Verdict",
    "conditions",
    "disk_conflict",
    "host",
    "interpod_affinity",
    "node_selector",
    "ports",
    "pressure",
    "resources",
    "taints",
    "topology_spread",
    "unschedulable",
]
