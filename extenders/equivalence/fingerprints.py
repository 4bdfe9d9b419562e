"""Immutable values of a node's parts (``NodeFamily``), to tell whether a cached verdict still holds.

The values are the data itself, not hashes, so equal fingerprints mean equal inputs: a stale
verdict cannot survive a collision. They are computed once per ``NodeInfo`` (which the snapshot
replaces whenever the node changes) and kept in its scratch space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extenders.model import NodeInfo
from extenders.plugins.framework import NodeFamily


def _labels(node: NodeInfo) -> Any:
    return frozenset(node.node.labels.items()) if node.node else None


def _taints(node: NodeInfo) -> Any:
    return (node.node.unschedulable, tuple(node.node.taints)) if node.node else None


def _conditions(node: NodeInfo) -> Any:
    return frozenset(node.node.conditions.items()) if node.node else None


def _resources(node: NodeInfo) -> Any:
    return (
        frozenset(node.allocatable.items()),
        frozenset(node.requested.items()),
        node.nonzero_cpu,
        node.nonzero_memory,
        len(node.pods),
    )


_VALUES: dict[str, Callable[[NodeInfo], Any]] = {
    NodeFamily.NAME: lambda node: node.name,
    NodeFamily.LABELS: _labels,
    NodeFamily.TAINTS: _taints,
    NodeFamily.CONDITIONS: _conditions,
    NodeFamily.RESOURCES: _resources,
    NodeFamily.PORTS: lambda node: frozenset(node.used_ports),
    NodeFamily.PODS: lambda node: frozenset(node.pods),
}
FAMILIES = frozenset(_VALUES)


def fingerprint_key(families: tuple[str, ...]) -> str:
    """Where ``fingerprints`` keeps its values on a node (a string: its hash is computed once)."""
    return "equivalence:" + ",".join(families)


def fingerprints(node: NodeInfo, families: tuple[str, ...], key: str | None = None) -> tuple[Any, ...]:
    """The values of ``families`` on ``node``, in that order (memoised on the node under ``key``)."""
    key = key or fingerprint_key(families)
    cached: tuple[Any, ...] | None = node.derived.get(key)
    if cached is None:
        cached = tuple(_VALUES[family](node) for family in families)
        node.derived[key] = cached
    return cached
