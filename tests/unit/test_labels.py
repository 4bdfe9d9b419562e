"""Label selectors, node selector terms and affinity terms (extenders.labels)."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.labels import (
    SelectorError,
    compile_affinity_term,
    compile_affinity_terms,
    compile_label_selector,
    compile_node_selector,
    label_selector_matches,
    node_selector_term_matches,
    required_node_affinity_terms,
)

LABELS = {"app": "web", "tier": "front", "n": "5"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {}}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchLabels": {"app": "web", "tier": "front"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        (
            {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            False,
        ),
    ],
)
def test_label_selector(selector: dict[str, Any] | None, expected: bool) -> None:
    assert label_selector_matches(selector, LABELS) is expected
    assert compile_label_selector(selector)(LABELS) is expected


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
    ],
)
def test_invalid_label_selector_raises(selector: dict[str, Any]) -> None:
    with pytest.raises(SelectorError):
        compile_label_selector(selector)


def test_compiled_selector_is_cached_by_identity() -> None:
    selector = {"matchLabels": {"app": "web"}}
    assert compile_label_selector(selector) is compile_label_selector(selector)
    equal_copy = {"matchLabels": {"app": "db"}}
    assert compile_label_selector(equal_copy)(LABELS) is False


NODE = {"zone": "z1", "cores": "8", "disk": "ssd", "weird": "08x"}


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        (None, False),
        ({}, False),
        ({"matchExpressions": []}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1", "z2"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}, True),
        ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}, False),
        ({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["16"]}]}, True),
        ({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "Gt", "values": ["0"]}]}, False),
        ({"matchExpressions": [{"key": "weird", "operator": "Gt", "values": ["0"]}]}, False),
        # An invalid requirement drops the whole term.
        ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["1", "2"]}]}, False),
        # Requirements inside a term are ANDed.
        (
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z1"]},
                    {"key": "disk", "operator": "In", "values": ["hdd"]},
                ]
            },
            False,
        ),
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}, True),
        ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}, False),
        ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-b"]}]}, True),
        ({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["node-a"]}]}, False),
        (
            {
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}],
            },
            False,
        ),
    ],
)
def test_node_selector_term(term: dict[str, Any] | None, expected: bool) -> None:
    assert node_selector_term_matches(term, "node-a", NODE) is expected


def test_node_selector_terms_are_ored_and_empty_list_matches_nothing() -> None:
    miss = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]}
    hit = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    assert compile_node_selector({"nodeSelectorTerms": [miss, hit]})("node-a", NODE) is True
    assert compile_node_selector({"nodeSelectorTerms": [miss]})("node-a", NODE) is False
    assert compile_node_selector({"nodeSelectorTerms": []})("node-a", NODE) is False
    assert compile_node_selector(None)("node-a", NODE) is False


def test_required_node_affinity_terms() -> None:
    assert required_node_affinity_terms({}) is None
    assert required_node_affinity_terms({"nodeAffinity": {}}) is None
    assert required_node_affinity_terms({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}) == []


@pytest.mark.parametrize(
    ("term", "namespace", "expected"),
    [
        ({"labelSelector": {"matchLabels": {"app": "web"}}}, "own", True),
        ({"labelSelector": {"matchLabels": {"app": "web"}}}, "other", False),
        ({"labelSelector": {"matchLabels": {"app": "web"}}, "namespaces": ["other"]}, "other", True),
        ({"labelSelector": {"matchLabels": {"app": "web"}}, "namespaces": ["other"]}, "own", False),
        ({"labelSelector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {}}, "anything", True),
        (
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}},
            },
            "other",
            True,
        ),
        (
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}},
            },
            "own",
            False,  # a namespaceSelector replaces the default of the owner's namespace
        ),
        # Other namespace labels are unknown: such a selector adds no namespace.
        (
            {"labelSelector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {"matchLabels": {"t": "x"}}},
            "x",
            False,
        ),
        ({"labelSelector": None}, "own", False),
        ({"labelSelector": {}}, "own", True),
    ],
)
def test_affinity_term_namespaces(term: dict[str, Any], namespace: str, expected: bool) -> None:
    assert compile_affinity_term(term, "own").matches(namespace, {"app": "web"}) is expected


@pytest.mark.parametrize(
    ("term", "namespace_labels", "expected"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"team": "a"}, True, id="labels-match"),
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"team": "b"}, False, id="labels-differ"),
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, None, False, id="unknown-name-only"),
        pytest.param({"namespaceSelector": {}}, {}, True, id="empty-selector"),
        pytest.param({"namespaces": ["x"], "namespaceSelector": {"matchLabels": {"t": "1"}}}, {}, True, id="listed"),
        pytest.param({}, {"team": "a"}, False, id="neither-own-namespace-only"),
        pytest.param({"namespaceSelector": None}, {"team": "a"}, False, id="null-selector-selects-none"),
    ],
)
def test_affinity_term_namespace_selector_reads_namespace_labels(
    term: dict[str, Any], namespace_labels: dict[str, str] | None, expected: bool
) -> None:
    compiled = compile_affinity_term({"labelSelector": {}, **term}, "own")
    assert compiled.matches("x", {"app": "web"}, namespace_labels) is expected


def test_with_namespaces_replaces_the_selector_by_names() -> None:
    term = compile_affinity_term(
        {"labelSelector": {}, "namespaces": ["a"], "namespaceSelector": {"matchLabels": {"t": "1"}}}, "own"
    )
    resolved = term.with_namespaces(frozenset({"b"}))
    assert resolved.namespaces == {"a", "b"} and resolved.namespace_selector is None
    assert resolved.matches("b", {}) and not resolved.matches("c", {}, {"t": "1"})
    assert term.namespace_selector is not None  # the compiled term itself is shared: unchanged


def test_affinity_terms_cache_respects_owner_namespace() -> None:
    terms = [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]
    first = compile_affinity_terms(terms, "a")
    assert compile_affinity_terms(terms, "a") is first
    second = compile_affinity_terms(terms, "b")
    assert second[0].matches("b", {"app": "web"}) and not second[0].matches("a", {"app": "web"})
    assert first[0].topology_key == "zone"
