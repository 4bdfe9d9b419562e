"""Affinity terms shared by the filter and the scorer: existing pods' terms indexed by the namespaces
they can select, and the namespaces a term's namespaceSelector picks from the snapshot's Namespaces.

namespaceSelector semantics are kube-scheduler's: a term selects a pod when the pod's namespace is
listed or its labels match the selector (``{}`` matches every namespace, no selector none beyond
the list). The incoming pod's terms have a non-empty selector replaced, once per call, by the
namespaces it selects (``resolve_terms``), so testing an existing pod against them needs no label
lookup and their queries can use the label index. Existing pods' terms keep their selector and are
evaluated against the labels of the incoming pod's namespace (``namespace_labels``).

A cluster always has namespaces, so a snapshot without any means they are not watched (RBAC); every
namespace is then taken to carry only ``kubernetes.io/metadata.name`` (see AffinityTerm.matches),
and the incoming pod's selectors stay as they are, evaluated per pod the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from extenders.canonical import canonical_json
from extenders.labels import AffinityTerm, LabelMatcher, is_match_all
from extenders.model import NamespaceInfo
from extenders.snapshot.summary import ClusterSummary

Entry = TypeVar("Entry", bound=tuple[Any, ...])  # an entry's first item is its AffinityTerm
NamespaceTable = Mapping[str, NamespaceInfo]
# A namespaceSelector's JSON -> the namespaces it picks from one Namespace table.
Selections = dict[bytes, frozenset[str]]

_NO_LABELS: Mapping[str, str] = {}
_SELECTIONS_LIMIT = 1024
_SELECTIONS = "interpod.namespace_selections"


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


def namespace_labels(namespaces: NamespaceTable, namespace: str) -> Mapping[str, str] | None:
    """The labels existing pods' namespaceSelectors are matched against for a pod in ``namespace``.

    None when the snapshot holds no Namespaces (not watched); an unknown namespace in a watched
    table has no labels, as kube-scheduler takes a namespace its lister does not have.
    """
    if not namespaces:
        return None
    info = namespaces.get(namespace)
    return info.labels if info is not None else _NO_LABELS


def _selected(
    selector: Mapping[str, Any], matcher: LabelMatcher, namespaces: NamespaceTable, summary: ClusterSummary | None
) -> frozenset[str]:
    """The namespaces ``selector`` (compiled as ``matcher``) picks, remembered with the snapshot's
    summary while the table is the same object (without a summary, worked out afresh).

    Keyed by the selector's JSON: the incoming pod is parsed afresh per call, so its objects
    are new every time, while pods of one template repeat the same selectors.
    """
    if summary is None:
        return frozenset(name for name, info in namespaces.items() if matcher(info.labels))
    selections: Selections = summary.derived(_SELECTIONS, namespaces, dict)
    key = canonical_json(selector)
    found = selections.get(key)
    if found is None:
        found = frozenset(name for name, info in namespaces.items() if matcher(info.labels))
        if len(selections) >= _SELECTIONS_LIMIT:
            selections.clear()
        selections[key] = found
    return found


def resolve_term(
    term: AffinityTerm, raw: Mapping[str, Any], namespaces: NamespaceTable, summary: ClusterSummary | None = None
) -> AffinityTerm:
    """The incoming pod's ``term`` (compiled from ``raw``) with a non-empty namespaceSelector replaced
    by the namespaces it selects; a term without one, or with ``{}``, is returned as it is.

    ``summary`` is the snapshot's (whose table ``namespaces`` is), where selections are kept.
    """
    matcher = term.namespace_selector
    if matcher is None or is_match_all(matcher) or not namespaces:
        return term
    return term.with_namespaces(_selected(raw.get("namespaceSelector") or {}, matcher, namespaces, summary))


def resolve_terms(
    terms: tuple[AffinityTerm, ...],
    raw: Sequence[Mapping[str, Any]],
    namespaces: NamespaceTable,
    summary: ClusterSummary | None = None,
) -> tuple[AffinityTerm, ...]:
    """``resolve_term`` over a pod's compiled terms and the raw terms they come from (same order)."""
    if all(t.namespace_selector is None for t in terms):
        return terms
    return tuple(resolve_term(t, r, namespaces, summary) for t, r in zip(terms, raw, strict=True))
