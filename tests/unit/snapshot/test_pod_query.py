"""NodeInfo's label index stays exact through add/replace/remove, and PodQuery agrees with a scan."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from extenders.labels import LabelMatcher, compile_affinity_term, compile_label_selector
from extenders.model import NodeInfo, Owner, PodInfo, label_key
from extenders.snapshot.pod_query import (
    MAX_INDEXED_NAMESPACES,
    PodQuery,
    namespace_query,
    selector_equalities,
    term_query,
)

NAMESPACES = ("ns1", "ns2", "ns3")
APPS = ("a", "b", "c", "d")
TIERS = ("web", "db")


def _pod(
    uid: str, labels: dict[str, str] | None = None, namespace: str = "ns1", owner: str = "", deleting: bool = False
) -> PodInfo:
    return PodInfo(
        namespace=namespace,
        name=uid,
        uid=uid,
        labels=dict(labels or {}),
        owner=Owner("ReplicaSet", owner, owner) if owner else None,
        deletion_timestamp="2024-01-01T00:00:00Z" if deleting else None,
    )


def _index_from_scratch(info: NodeInfo) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod in info.pods.values():
        for k, v in pod.labels.items():
            out.setdefault(label_key(pod.namespace, k, v), []).append(pod.uid)
    return {k: sorted(v) for k, v in out.items()}


def _index(info: NodeInfo) -> dict[str, list[str]]:
    return {k: sorted(p.uid for p in pods) for k, pods in info.pods_by_label.items()}


def test_indexes_follow_add_replace_remove() -> None:
    pods = [_pod("a", {"app": "x"}, owner="rs1"), _pod("b", {"app": "x"}, "ns2"), _pod("c", {"app": "y"})]
    info = NodeInfo.build("n", None, pods)
    assert _index(info) == _index_from_scratch(info)
    assert [p.uid for p in info.pods_by_label[label_key("ns1", "app", "x")]] == ["a"]
    info.add_pod(_pod("a", {"app": "z"}, owner="rs2"))  # replaced: old labels gone
    assert label_key("ns1", "app", "x") not in info.pods_by_label
    assert _index(info) == _index_from_scratch(info)
    info.remove_pod("c")
    info.remove_pod("missing")
    assert _index(info) == _index_from_scratch(info)
    info.remove_pod("a")
    info.remove_pod("b")
    assert info.pods_by_label == {}


def test_indexes_stay_exact_under_random_churn() -> None:
    rng = random.Random(7)
    info = NodeInfo.build("n", None, [])
    for step in range(400):
        uid = f"p{rng.randrange(15)}"
        if rng.random() < 0.35:
            info.remove_pod(uid)
        else:
            labels = {"app": rng.choice(APPS)} if rng.random() < 0.8 else {}
            if rng.random() < 0.5:
                labels["tier"] = rng.choice(TIERS)
            info.add_pod(_pod(uid, labels, rng.choice(NAMESPACES), owner=rng.choice(("", "r1", "r2"))))
        assert _index(info) == _index_from_scratch(info), step


def _selector(rng: random.Random) -> dict[str, Any] | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return {}
    selector: dict[str, Any] = {}
    if rng.random() < 0.6:
        selector["matchLabels"] = {"app": rng.choice(APPS)}
        if rng.random() < 0.3:
            selector["matchLabels"]["tier"] = rng.choice(TIERS)
    expressions = []
    for _ in range(rng.choice((0, 0, 1, 2))):
        op = rng.choice(("In", "In", "NotIn", "Exists", "DoesNotExist"))
        expr: dict[str, Any] = {"key": rng.choice(("app", "tier")), "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = rng.choices(APPS + TIERS, k=rng.choice((1, 2, 3)))  # duplicates on purpose
        expressions.append(expr)
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def _random_node(rng: random.Random) -> NodeInfo:
    pods = []
    for i in range(rng.randrange(0, 25)):
        labels = {}
        if rng.random() < 0.85:
            labels["app"] = rng.choice(APPS)
        if rng.random() < 0.5:
            labels["tier"] = rng.choice(TIERS)
        pods.append(_pod(f"p{i}", labels, rng.choice(NAMESPACES), deleting=rng.random() < 0.1))
    return NodeInfo.build("n", None, pods)


def _assert_probes_cover(query: PodQuery, pods: Iterable[PodInfo], selected: list[str], case: int) -> None:
    """Every selected pod carries one of the query's probe keys (what node visits rely on)."""
    if query.probe_keys is None:
        return
    keys = set(query.probe_keys)
    for pod in pods:
        if pod.uid in selected:
            assert keys & {label_key(pod.namespace, k, v) for k, v in pod.labels.items()}, case


def test_namespace_query_matches_a_scan() -> None:
    rng = random.Random(11)
    indexed = 0
    for case in range(1500):
        node = _random_node(rng)
        selector = _selector(rng)
        namespace = rng.choice(NAMESPACES)
        extra = (("tier", rng.choice(TIERS)),) if rng.random() < 0.2 else ()
        base = compile_label_selector(selector)

        def matcher(labels: Mapping[str, str], b: LabelMatcher = base, e: tuple[tuple[str, str], ...] = extra) -> bool:
            return b(labels) and all(labels.get(k) == v for k, v in e)

        query = namespace_query(namespace, selector, matcher, extra)
        indexed += query.indexed
        want = sorted(p.uid for p in node.pods.values() if p.namespace == namespace and matcher(p.labels))
        assert sorted(p.uid for p in query.pods(node)) == want, (case, selector, extra)
        live = [p for p in node.pods.values() if p.namespace == namespace and matcher(p.labels) and p.uid != "p0"]
        assert query.count(node, "p0", live_only=True) == sum(p.deletion_timestamp is None for p in live), case
        if query.probe is not None and want:
            assert query.probe in node.pods_by_label, case
        _assert_probes_cover(query, node.pods.values(), want, case)
    assert indexed > 500  # most random selectors have an equality requirement


def test_term_query_matches_a_scan() -> None:
    rng = random.Random(12)
    for case in range(1500):
        node = _random_node(rng)
        raw: dict[str, Any] = {"topologyKey": "zone"}
        selector = _selector(rng)
        if selector is not None:
            raw["labelSelector"] = selector
        roll = rng.random()
        if roll < 0.3:
            raw["namespaces"] = rng.sample(NAMESPACES, rng.choice((1, 2)))
        elif roll < 0.4:
            raw["namespaceSelector"] = {}
        elif roll < 0.5:
            raw["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": rng.choice(NAMESPACES)}}
        elif roll < 0.55:
            raw["namespaceSelector"] = {"matchLabels": {"team": "x"}}
        term = compile_affinity_term(raw, rng.choice(NAMESPACES))
        query = term_query(term, raw)
        want = sorted(p.uid for p in node.pods.values() if term.matches(p.namespace, p.labels))
        assert sorted(p.uid for p in query.pods(node)) == want, (case, raw)
        _assert_probes_cover(query, node.pods.values(), want, case)


@pytest.mark.parametrize(
    ("count", "indexed"), [(3, True), (MAX_INDEXED_NAMESPACES, True), (MAX_INDEXED_NAMESPACES + 1, False)]
)
def test_a_term_over_many_namespaces_scans(count: int, indexed: bool) -> None:
    namespaces = [f"ns{i}" for i in range(count)]
    raw = {"labelSelector": {"matchLabels": {"app": "a"}}, "namespaces": namespaces, "topologyKey": "zone"}
    term = compile_affinity_term(raw, "ns0")
    query = term_query(term, raw)
    assert query.indexed is indexed
    pods = [_pod(f"p{i}", {"app": "a"}, namespace=ns) for i, ns in enumerate([*namespaces[:3], "elsewhere"])]
    node = NodeInfo.build("n", None, pods)
    assert sorted(p.uid for p in query.pods(node)) == ["p0", "p1", "p2"]


def test_equalities_are_read_from_match_labels_and_in_only() -> None:
    selector = {
        "matchLabels": {"app": "a"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "db", "web"]},
            {"key": "x", "operator": "NotIn", "values": ["1"]},
            {"key": "y", "operator": "Exists"},
        ],
    }
    assert selector_equalities(selector) == [("app", ("a",)), ("tier", ("web", "db"))]
    assert selector_equalities({}) == [] and selector_equalities(None) == []


def test_query_without_equality_scans() -> None:
    query = PodQuery(lambda ns, labels: "app" in labels, ("ns1",), [])
    node = NodeInfo.build("n", None, [_pod("a", {"app": "x"}), _pod("b", {"tier": "web"})])
    assert not query.indexed and query.probe is None
    assert [p.uid for p in query.pods(node)] == ["a"]
