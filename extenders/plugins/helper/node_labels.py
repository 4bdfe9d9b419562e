"""Label values of many nodes at once, for the filters that decide every candidate in one call."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, repeat
from operator import attrgetter, contains, methodcaller

from extenders.model import NodeInfo

_LABELS = attrgetter("node.labels")


def labels_of(nodes: list[NodeInfo]) -> list[Mapping[str, str]]:
    """Each node's labels; every node has its object (the engine sends no unknown node to a check)."""
    return list(map(_LABELS, nodes))


def values_of(labels: list[Mapping[str, str]], key: str) -> list[str | None]:
    """Each node's value of label ``key``; None where the node does not carry it."""
    return list(map(methodcaller("get", key), labels))


def positions_in(values: list[str | None], chosen: set[str]) -> list[int]:
    """The positions whose value is one of ``chosen`` (None never is)."""
    return list(compress(range(len(values)), map(contains, repeat(chosen), values)))
