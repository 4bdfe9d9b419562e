"""InterPodAffinity scoring: both directions, anti-affinity, symmetric weight, namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.labels import NAMESPACE_NAME_LABEL
from extenders.model import NamespaceInfo, NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info
from tests.unit.plugins.scoring import HOST, ZONE
from tests.unit.plugins.scoring import run as score

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def pod(
    name: str,
    node: str = "",
    labels: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    namespace: str = "default",
) -> PodInfo:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    if affinity:
        spec["affinity"] = affinity
    return pod_info(
        {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}}, "spec": spec}
    )


def node(name: str, zone: str | None, pods: list[PodInfo] | None = None) -> NodeInfo:
    labels = {HOST: name}
    if zone:
        labels[ZONE] = zone
    return NodeInfo.build(name, node_facts({"metadata": {"name": name, "labels": labels}}), pods or [])


def term(app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def weighted(weight: int, app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": term(app, key, **extra)}


def run(incoming: PodInfo, nodes: list[NodeInfo], hard_weight: int = 1) -> tuple[dict[str, float], dict[str, float]]:
    ctx = ScoringContext(resource_weights={"cpu": 1, "memory": 1}, hard_pod_affinity_symmetric_weight=hard_weight)
    return score("InterPodAffinity", incoming, nodes, ctx=ctx)


def test_incoming_pod_preferred_affinity_and_anti_affinity() -> None:
    incoming = pod(
        "in",
        affinity={
            "podAffinity": {PREFERRED: [weighted(10, "db")]},
            "podAntiAffinity": {PREFERRED: [weighted(4, "web", HOST)]},
        },
    )
    nodes = [
        node("n1", "a", [pod("db", "n1", {"app": "db"})]),
        node("n2", "a", [pod("w1", "n2", {"app": "web"})]),
        node("n3", "b", [pod("w2", "n3", {"app": "web"}), pod("x", "n3", {"app": "other"})]),
        node("n4", "c"),
    ]
    raw, normalized = run(incoming, nodes)
    assert raw == {"n1": 10.0, "n2": 6.0, "n3": -4.0, "n4": 0.0}
    assert normalized == pytest.approx({"n1": 10.0, "n2": 100 / 14, "n3": 0.0, "n4": 40 / 14})


def _symmetric_nodes() -> list[NodeInfo]:
    return [
        node("n1", "a", [pod("e1", "n1", {"app": "cache"}, {"podAffinity": {PREFERRED: [weighted(7, "web")]}})]),
        node("n2", "a"),
        node("n3", "b", [pod("e2", "n3", {"app": "batch"}, {"podAntiAffinity": {PREFERRED: [weighted(3, "web")]}})]),
        node("n4", "c", [pod("e3", "n4", {"app": "sidecar"}, {"podAffinity": {REQUIRED: [term("web", HOST)]}})]),
        # required anti-affinity of existing pods plays no part in scoring
        node("n5", "d", [pod("e4", "n5", {}, {"podAntiAffinity": {REQUIRED: [term("web", HOST)]}})]),
    ]


@pytest.mark.parametrize(
    ("hard_weight", "n4_raw"),
    [(1, 1.0), (5, 5.0), (0, 0.0)],
)
def test_existing_pods_terms_apply_to_incoming_pod(hard_weight: int, n4_raw: float) -> None:
    incoming = pod("in", labels={"app": "web"})
    raw, normalized = run(incoming, _symmetric_nodes(), hard_weight)
    assert raw == {"n1": 7.0, "n2": 7.0, "n3": -3.0, "n4": n4_raw, "n5": 0.0}
    assert normalized == pytest.approx({"n1": 10.0, "n2": 10.0, "n3": 0.0, "n4": (n4_raw + 3) / 10 * 10, "n5": 3.0})


def test_terms_default_to_their_owner_namespace() -> None:
    nodes = [
        node("n1", "a", [pod("e1", "n1", {}, {"podAffinity": {PREFERRED: [weighted(7, "web")]}}, "team-b")]),
        node("n2", "b", [pod("e2", "n2", {}, {"podAffinity": {PREFERRED: [weighted(2, "web")]}})]),
    ]
    raw, normalized = run(pod("in", labels={"app": "web"}), nodes)
    assert raw == {"n1": 0.0, "n2": 2.0}  # e1's term looks only in team-b
    assert normalized == {"n1": 0.0, "n2": 10.0}


@pytest.mark.parametrize(
    ("extra", "matches"),
    [
        ({"namespaceSelector": {}}, True),  # every namespace
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}, True),
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prod"}}}, False),
        ({"namespaces": ["default"]}, True),
        ({"namespaces": ["prod"]}, False),
        # no Namespace objects in the snapshot: a selector on other labels selects no namespace
        ({"namespaceSelector": {"matchLabels": {"team": "b"}}}, False),
        ({"namespaces": ["default"], "namespaceSelector": {"matchLabels": {"team": "b"}}}, True),
    ],
)
def test_namespaces_and_namespace_selector(extra: dict[str, Any], matches: bool) -> None:
    nodes = [
        node("n1", "a", [pod("e1", "n1", {}, {"podAffinity": {PREFERRED: [weighted(7, "web", **extra)]}}, "team-b")]),
        node("n2", "b"),
    ]
    raw, _ = run(pod("in", labels={"app": "web"}), nodes)
    assert raw == {"n1": 7.0 if matches else 0.0, "n2": 0.0}


def test_incoming_terms_look_in_other_namespaces_only_when_asked() -> None:
    nodes = [node("n1", "a", [pod("db", "n1", {"app": "db"}, namespace="data")]), node("n2", "b")]
    own_ns = pod("in", affinity={"podAffinity": {PREFERRED: [weighted(5, "db")]}})
    raw, normalized = run(own_ns, nodes)
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 0.0, "n2": 0.0}
    listed = pod("in", affinity={"podAffinity": {PREFERRED: [weighted(5, "db", namespaces=["data"])]}})
    raw, normalized = run(listed, nodes)
    assert raw == {"n1": 5.0, "n2": 0.0}
    assert normalized == {"n1": 10.0, "n2": 0.0}


def test_nothing_to_count_scores_zero_everywhere() -> None:
    nodes = [node("n1", "a", [pod("x", "n1", {"app": "x"})]), node("n2", "b")]
    raw, normalized = run(pod("in", labels={"app": "web"}), nodes)
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 0.0, "n2": 0.0}


def test_unlabelled_nodes_and_missing_topology_keys_contribute_nothing() -> None:
    bare = NodeInfo.build("bare", node_facts({"metadata": {"name": "bare"}}), [pod("db", "bare", {"app": "db"})])
    nodes = [bare, node("n1", None, [pod("db2", "n1", {"app": "db"})]), node("n2", "a")]
    incoming = pod("in", affinity={"podAffinity": {PREFERRED: [weighted(5, "db")]}})
    raw, _ = run(incoming, nodes)
    assert raw == {"bare": 0.0, "n1": 0.0, "n2": 0.0}


class _NoScanDict(dict[str, PodInfo]):
    """A pod map that fails the test if anything iterates over all of its pods."""

    def values(self) -> Any:
        raise AssertionError("prepare walked every pod although no pod needs it")


def test_prepare_visits_only_pods_with_affinity_when_incoming_has_no_terms() -> None:
    nodes = _symmetric_nodes()
    for info in nodes:
        info.pods = _NoScanDict(info.pods)
    raw, _ = run(pod("in", labels={"app": "web"}), nodes)
    assert raw["n1"] == 7.0


# ---------------------------------------------------------------- namespaceSelector against Namespace labels
TEAMS = {"default": {}, "team-a": {"team": "a"}, "team-b": {"team": "b"}, "data": {}}


def run_with_namespaces(incoming: PodInfo, nodes: list[NodeInfo], hard_weight: int = 1) -> dict[str, float]:
    """Raw scores over a snapshot that holds the Namespaces of TEAMS (with their name labels)."""
    ctx = ScoringContext(resource_weights={"cpu": 1, "memory": 1}, hard_pod_affinity_symmetric_weight=hard_weight)
    snapshot = Snapshot(nodes={n.name: n for n in nodes})
    snapshot.objects = {
        "namespaces": {
            name: NamespaceInfo(name, {NAMESPACE_NAME_LABEL: name, **labels}) for name, labels in TEAMS.items()
        }
    }
    scorer = SCORERS["InterPodAffinity"]
    state = scorer.prepare(incoming, snapshot, nodes, ctx)
    return {n.name: scorer.score(incoming, n, state, ctx) for n in nodes}


@pytest.mark.parametrize(
    ("extra", "raw"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"n1": 5.0}, id="labels-match"),
        pytest.param({"namespaceSelector": {}}, {"n1": 5.0, "n2": 5.0, "n3": 5.0}, id="empty-selector"),
        pytest.param(
            {"namespaces": ["data"], "namespaceSelector": {"matchLabels": {"team": "b"}}},
            {"n2": 5.0, "n3": 5.0},
            id="list-united-with-selector",
        ),
        pytest.param({}, {}, id="neither-means-own-namespace"),
    ],
)
def test_incoming_pods_namespace_selector_matches_namespace_labels(
    extra: dict[str, Any], raw: dict[str, float]
) -> None:
    nodes = [
        node("n1", "a", [pod("db", "n1", {"app": "db"}, namespace="team-a")]),
        node("n2", "b", [pod("db", "n2", {"app": "db"}, namespace="team-b")]),
        node("n3", "c", [pod("db", "n3", {"app": "db"}, namespace="data")]),
    ]
    incoming = pod("in", affinity={"podAffinity": {PREFERRED: [weighted(5, "db", **extra)]}})
    assert run_with_namespaces(incoming, nodes) == {"n1": 0.0, "n2": 0.0, "n3": 0.0, **raw}


@pytest.mark.parametrize(
    ("selector", "incoming_namespace", "matches"),
    [
        pytest.param({"matchLabels": {"team": "a"}}, "team-a", True, id="incoming-namespace-labels-match"),
        pytest.param({"matchLabels": {"team": "a"}}, "team-b", False, id="incoming-namespace-labels-differ"),
        pytest.param({}, "data", True, id="empty-selector"),
        pytest.param({"matchLabels": {"team": "a"}}, "ghost", False, id="unknown-namespace-has-no-labels"),
    ],
)
def test_existing_pods_namespace_selector_reads_the_incoming_namespace(
    selector: dict[str, Any], incoming_namespace: str, matches: bool
) -> None:
    preferred = {"podAffinity": {PREFERRED: [weighted(7, "web", namespaceSelector=selector)]}}
    required = {"podAffinity": {REQUIRED: [term("web", namespaceSelector=selector)]}}
    anti = {"podAntiAffinity": {PREFERRED: [weighted(3, "web", namespaceSelector=selector)]}}
    nodes = [
        node("n1", "a", [pod("e1", "n1", {}, preferred, "data")]),
        node("n2", "b", [pod("e2", "n2", {}, required, "data")]),
        node("n3", "c", [pod("e3", "n3", {}, anti, "data")]),
    ]
    raw = run_with_namespaces(pod("in", labels={"app": "web"}, namespace=incoming_namespace), nodes, hard_weight=2)
    assert raw == ({"n1": 7.0, "n2": 2.0, "n3": -3.0} if matches else {"n1": 0.0, "n2": 0.0, "n3": 0.0})
