"""Resolving affinity terms' namespaceSelectors against the snapshot's Namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.labels import NAMESPACE_NAME_LABEL, compile_affinity_term
from extenders.model import NamespaceInfo
from extenders.plugins.inter_pod_affinity.terms import namespace_labels, resolve_term, resolve_terms
from extenders.snapshot import Snapshot


def table(**labels: dict[str, str]) -> dict[str, NamespaceInfo]:
    return {name: NamespaceInfo(name, {NAMESPACE_NAME_LABEL: name, **extra}) for name, extra in labels.items()}


TABLE = table(a={"team": "x"}, b={"team": "y"}, c={})


@pytest.mark.parametrize(
    ("raw", "namespaces", "open_ended"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "x"}}}, {"a"}, False, id="labels"),
        pytest.param(
            {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]}},
            {"b", "c"},
            False,
            id="not-in",
        ),
        pytest.param({"namespaces": ["z"], "namespaceSelector": {"matchLabels": {"team": "y"}}}, {"b", "z"}, False),
        pytest.param({"namespaceSelector": {}}, set(), True, id="empty-selector-stays-open"),
        pytest.param({}, {"own"}, False, id="neither"),
        pytest.param({"namespaces": ["z"]}, {"z"}, False, id="list-only"),
    ],
)
def test_resolve_term(raw: dict[str, Any], namespaces: set[str], open_ended: bool) -> None:
    raw = {"labelSelector": {}, **raw}
    term = resolve_term(compile_affinity_term(raw, "own"), raw, TABLE)
    assert term.namespaces == namespaces
    assert (term.namespace_selector is not None) is open_ended


def test_resolution_is_kept_per_table_and_follows_a_new_table() -> None:
    raw = {"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "x"}}}
    first = resolve_term(compile_affinity_term(raw, "own"), raw, TABLE)
    # an equal selector parsed again (a new request) resolves the same
    again_raw = {"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "x"}}}
    again = resolve_term(compile_affinity_term(again_raw, "own"), again_raw, TABLE)
    assert first.namespaces == again.namespaces == {"a"}
    relabelled = table(a={"team": "x"}, b={"team": "x"}, c={})
    assert resolve_term(compile_affinity_term(raw, "own"), raw, relabelled).namespaces == {"a", "b"}


def test_without_a_table_selectors_stay_and_see_only_the_name_label() -> None:
    raw = {"labelSelector": {}, "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "a"}}}
    compiled = compile_affinity_term(raw, "own")
    assert resolve_term(compiled, raw, {}) is compiled
    assert compiled.matches("a", {}) and not compiled.matches("b", {})


def test_terms_without_selectors_are_returned_as_they_are() -> None:
    raws: list[dict[str, Any]] = [{"labelSelector": {}}, {"labelSelector": {}, "namespaces": ["z"]}]
    terms = tuple(compile_affinity_term(r, "own") for r in raws)
    assert resolve_terms(terms, raws, TABLE) is terms


def test_namespace_labels() -> None:
    assert namespace_labels({}, "a") is None  # Namespaces not watched
    assert namespace_labels(TABLE, "a") == {NAMESPACE_NAME_LABEL: "a", "team": "x"}
    assert namespace_labels(TABLE, "ghost") == {}  # as kube-scheduler takes a namespace it has not seen


class CountingTable(dict[str, NamespaceInfo]):
    """A Namespace table that counts the walks made over it."""

    walks = 0

    def items(self) -> Any:
        self.walks += 1
        return super().items()


def test_two_snapshots_in_use_at_once_keep_their_own_selections() -> None:
    """Each snapshot keeps its selections in its own summary: alternating between two answers both
    rightly, and each table is walked once per selector."""
    raw = {"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "x"}}}
    tables = [CountingTable(TABLE), CountingTable(table(a={}, b={"team": "x"}, c={"team": "x"}))]
    first, second = Snapshot(objects={"namespaces": tables[0]}), Snapshot(objects={"namespaces": tables[1]})
    for _ in range(3):
        for snapshot, expected in ((first, {"a"}), (second, {"b", "c"})):
            term = resolve_term(compile_affinity_term(raw, "own"), raw, snapshot.namespaces, snapshot.summary())
            assert term.namespaces == expected
    assert [t.walks for t in tables] == [1, 1]
    # The next snapshot of an unchanged node table shares the summary, but not the selections of a
    # Namespace table it does not hold; used beside the older one, neither is walked again.
    tables.append(CountingTable(table(a={"team": "x"}, b={"team": "x"})))
    relabelled = Snapshot(objects={"namespaces": tables[2]}, summary_seed=first.seed())
    assert relabelled.summary() is first.summary()
    for _ in range(3):
        for snapshot, expected in ((first, {"a"}), (relabelled, {"a", "b"})):
            term = resolve_term(compile_affinity_term(raw, "own"), raw, snapshot.namespaces, snapshot.summary())
            assert term.namespaces == expected
    assert [t.walks for t in tables] == [1, 1, 1]
