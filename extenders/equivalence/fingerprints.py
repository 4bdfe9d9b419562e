"""Immutable values of a node's parts (``NodeFamily``), to tell whether a cached verdict still holds.

In a replica's memory the values are the data itself, not hashes, so equal fingerprints mean equal
inputs: a stale verdict cannot survive a collision. Between replicas (through Redis) they travel as
digests (``digests``): 128-bit blake2b of a canonical text of each part, the same in every process.
Both are computed once per ``NodeInfo`` (which the snapshot replaces whenever the node changes) and
kept in its scratch space.
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import blake2b
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
DIGEST_SIZE = 16


# The same parts as ``_VALUES``, as text that is equal in every process exactly when the values are
# equal: ``repr`` of strings, integers, booleans and tuples does not depend on hash seeds, and
# whatever is a set or a mapping is sorted first.
def _canonical_taints(node: NodeInfo) -> str:
    if node.node is None:
        return "None"
    return repr((node.node.unschedulable, [(t.key, t.value, t.effect) for t in node.node.taints]))


def _canonical_resources(node: NodeInfo) -> str:
    return repr(
        (
            sorted(node.allocatable.items()),
            sorted(node.requested.items()),
            node.nonzero_cpu,
            node.nonzero_memory,
            len(node.pods),
        )
    )


_CANONICAL: dict[str, Callable[[NodeInfo], str]] = {
    NodeFamily.NAME: lambda node: repr(node.name),
    NodeFamily.LABELS: lambda node: repr(sorted(node.node.labels.items())) if node.node else "None",
    NodeFamily.TAINTS: _canonical_taints,
    NodeFamily.CONDITIONS: lambda node: repr(sorted(node.node.conditions.items())) if node.node else "None",
    NodeFamily.RESOURCES: _canonical_resources,
    NodeFamily.PORTS: lambda node: repr(sorted(node.used_ports)),
    NodeFamily.PODS: lambda node: repr(sorted(node.pods)),
}


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


def digests(node: NodeInfo, families: tuple[str, ...]) -> bytes:
    """The digests of ``families`` on ``node``, ``DIGEST_SIZE`` bytes each, in that order (memoised
    per family on the node): what an entry shared between replicas is checked against."""
    derived = node.derived
    parts: list[bytes] = []
    for family in families:
        key = ("digest", family)
        digest: bytes | None = derived.get(key)
        if digest is None:
            text = _CANONICAL[family](node).encode("utf-8", "surrogatepass")
            digest = derived[key] = blake2b(text, digest_size=DIGEST_SIZE).digest()
        parts.append(digest)
    return b"".join(parts)
