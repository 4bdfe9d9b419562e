"""Existing pods' affinity terms indexed by the namespaces they can select (filter and score share it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from extenders.labels import AffinityTerm

Entry = TypeVar("Entry", bound=tuple[Any, ...])  # an entry's first item is its AffinityTerm


def by_namespace(entries: Iterable[Entry]) -> dict[str | None, list[Entry]]:
    """Each entry under every namespace its term lists, or under None when a namespace selector
    decides, so an incoming pod tests only the terms that can select its namespace."""
    found: dict[str | None, list[Entry]] = {}
    for entry in entries:
        term: AffinityTerm = entry[0]
        if term.namespace_selector is not None:
            found.setdefault(None, []).append(entry)
        else:
            for ns in term.namespaces:
                found.setdefault(ns, []).append(entry)
    return found


def may_select(index: Mapping[str | None, object], namespace: str) -> bool:
    """Whether an index from ``by_namespace`` holds a term that can select a pod in ``namespace``."""
    return namespace in index or None in index
