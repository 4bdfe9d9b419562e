"""SelectorSpread and PodTopologySpread (ScheduleAnyway) against hand-computed scores."""

from __future__ import annotations

import math
from typing import Any

import pytest

from extenders.convert import node_facts, pod_info
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.plugins.selector_spread import zone_key
from extenders.snapshot import Snapshot

CTX = ScoringContext(resource_weights={"cpu": 1, "memory": 1})
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def pod(
    name: str,
    node: str = "",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    owner_uid: str | None = None,
    spec: dict[str, Any] | None = None,
    deleting: bool = False,
) -> PodInfo:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    body = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}], **(spec or {})}
    return pod_info({"metadata": meta, "spec": body})


def node(
    name: str,
    labels: dict[str, str] | None = None,
    pods: list[PodInfo] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> NodeInfo:
    facts = node_facts(
        {"metadata": {"name": name, "labels": {HOST: name, **(labels or {})}}, "spec": {"taints": taints or []}}
    )
    return NodeInfo.build(name, facts, pods or [])


def run(
    name: str, incoming: PodInfo, nodes: list[NodeInfo], extra: list[NodeInfo] | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    priority = SCORERS[name]
    snapshot = Snapshot(nodes={n.name: n for n in [*nodes, *(extra or [])]})
    state = priority.prepare(incoming, snapshot, nodes, CTX)
    raw = {n.name: priority.score(incoming, n, state, CTX) for n in nodes}
    return raw, priority.normalize(raw, state)


# ------------------------------------------------------------------ SelectorSpread
def _spread_nodes(zoned: bool = True) -> list[NodeInfo]:
    def z(zone: str) -> dict[str, str]:
        return {ZONE: zone} if zoned else {}

    return [
        node("n1", z("a"), [pod("p1", "n1", owner_uid="rs1"), pod("p2", "n1", owner_uid="rs1")]),
        node("n2", z("a"), [pod("p3", "n2", owner_uid="other")]),
        node(
            "n3",
            z("b"),
            [
                pod("p4", "n3", owner_uid="rs1"),
                pod("p5", "n3", owner_uid="rs1", deleting=True),  # terminating: not counted
                pod("p6", "n3", owner_uid="rs1", namespace="elsewhere"),  # other namespace: not counted
                pod("p7", "n3"),  # no owner
            ],
        ),
    ]


def test_selector_spread_counts_same_owner_and_weights_zones() -> None:
    raw, normalized = run("SelectorSpread", pod("in", owner_uid="rs1"), _spread_nodes())
    assert raw == {"n1": 2.0, "n2": 0.0, "n3": 1.0}
    # node scores 0, 10, 5; zone a holds 2 (score 0), zone b 1 (score 5); zone weighted 2/3
    assert normalized == pytest.approx({"n1": 0.0, "n2": 10 / 3, "n3": 5.0})


def test_selector_spread_without_zones_uses_node_counts_only() -> None:
    _, normalized = run("SelectorSpread", pod("in", owner_uid="rs1"), _spread_nodes(zoned=False))
    assert normalized == pytest.approx({"n1": 0.0, "n2": 10.0, "n3": 5.0})


def test_selector_spread_mixes_zoned_and_unzoned_nodes() -> None:
    nodes = [
        node("n1", {ZONE: "a"}, [pod("p1", "n1", owner_uid="rs1")]),
        node("n2", {}, [pod("p2", "n2", owner_uid="rs1"), pod("p3", "n2", owner_uid="rs1")]),
        node("n3", {ZONE: "b"}),
    ]
    _, normalized = run("SelectorSpread", pod("in", owner_uid="rs1"), nodes)
    # node scores 5, 0, 10; zones a=1 (0), b=0 (10); n2 has no zone: node score only
    assert normalized == pytest.approx({"n1": 5 / 3, "n2": 0.0, "n3": 10.0})


def test_selector_spread_without_owner_scores_max_and_with_constraints_zero() -> None:
    _, no_owner = run("SelectorSpread", pod("in"), _spread_nodes())
    assert no_owner == {"n1": 10.0, "n2": 10.0, "n3": 10.0}
    constrained = pod(
        "in",
        owner_uid="rs1",
        spec={
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
            ]
        },
    )
    raw, skipped = run("SelectorSpread", constrained, _spread_nodes())
    assert raw == {"n1": 0.0, "n2": 0.0, "n3": 0.0}
    assert skipped == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


def test_zone_key() -> None:
    assert zone_key({}) == ""
    assert zone_key({ZONE: "a"}) == zone_key({"failure-domain.beta.kubernetes.io/zone": "a"})
    assert zone_key({ZONE: "a", "topology.kubernetes.io/region": "r1"}) != zone_key({ZONE: "a"})


# ------------------------------------------------------------------ PodTopologySpread
def _constraint(
    key: str = ZONE, skew: int = 1, selector: dict[str, Any] | None = None, when: str = "ScheduleAnyway", **extra: Any
) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}} if selector is None else selector,
        **extra,
    }


def _web(name: str, node_name: str, **labels: str) -> PodInfo:
    return pod(name, node_name, {"app": "web", **labels})


def _topology_nodes() -> tuple[list[NodeInfo], list[NodeInfo]]:
    candidates = [
        node("n1", {ZONE: "a", "disk": "ssd"}, [_web("w1", "n1")]),
        node(
            "n2",
            {ZONE: "a", "disk": "ssd"},
            [
                _web("w2", "n2"),
                pod("o1", "n2", {"app": "db"}),
                _web("w3", "n2", version="v2"),
                pod("w4", "n2", {"app": "web"}, deleting=True),
                pod("w5", "n2", {"app": "web"}, namespace="elsewhere"),
            ],
        ),
        node("n3", {ZONE: "b", "disk": "ssd"}),
        node("n4", {"disk": "ssd"}, [_web("w6", "n4")]),  # no zone label: ignored
    ]
    extra = [
        node("n5", {ZONE: "b"}, [_web("w7", "n5")]),  # not a candidate, but its domain is
        node("n6", {ZONE: "c", "disk": "ssd"}, [_web("w8", "n6")]),  # domain of no candidate
    ]
    return candidates, extra


def test_topology_spread_scores_fewer_matching_pods_higher() -> None:
    candidates, extra = _topology_nodes()
    incoming = pod(
        "in", labels={"app": "web"}, spec={"topologySpreadConstraints": [_constraint(nodeAffinityPolicy="Ignore")]}
    )
    raw, normalized = run("PodTopologySpread", incoming, candidates, extra)
    weight = math.log(2 + 2)  # two candidate domains, a and b
    # zone a: w1, w2, w3 (v2 still matches app=web); zone b: w7
    assert raw == pytest.approx({"n1": 3 * weight, "n2": 3 * weight, "n3": 1 * weight, "n4": 0.0})
    high, low = 3 * weight, 1 * weight
    assert normalized == pytest.approx(
        {"n1": 10 * (high + low - high) / high, "n2": 10 * low / high, "n3": 10.0, "n4": 0.0}
    )


def test_topology_spread_node_inclusion_policies() -> None:
    candidates, extra = _topology_nodes()
    extra[0] = node(
        "n5",
        {ZONE: "b"},
        [_web("w7", "n5"), _web("w9", "n5")],
        taints=[{"key": "k", "value": "", "effect": "NoSchedule"}],
    )
    spec: dict[str, Any] = {"nodeSelector": {"disk": "ssd"}}
    honour_affinity = pod("in", labels={"app": "web"}, spec={**spec, "topologySpreadConstraints": [_constraint()]})
    raw, _ = run("PodTopologySpread", honour_affinity, candidates, extra)
    # n5 lacks disk=ssd: by default (nodeAffinityPolicy Honor) its pods are not counted
    assert raw["n3"] == 0.0
    ignore_affinity = pod(
        "in",
        labels={"app": "web"},
        spec={**spec, "topologySpreadConstraints": [_constraint(nodeAffinityPolicy="Ignore")]},
    )
    raw, _ = run("PodTopologySpread", ignore_affinity, candidates, extra)
    assert raw["n3"] == pytest.approx(2 * math.log(4))
    honour_taints = pod(
        "in",
        labels={"app": "web"},
        spec={"topologySpreadConstraints": [_constraint(nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor")]},
    )
    raw, _ = run("PodTopologySpread", honour_taints, candidates, extra)
    assert raw["n3"] == 0.0  # the NoSchedule taint is not tolerated


def test_topology_spread_match_label_keys_narrow_the_selector() -> None:
    candidates, extra = _topology_nodes()
    incoming = pod(
        "in",
        labels={"app": "web", "version": "v2"},
        spec={
            "topologySpreadConstraints": [
                _constraint(nodeAffinityPolicy="Ignore", matchLabelKeys=["version", "absent"])
            ]
        },
    )
    raw, _ = run("PodTopologySpread", incoming, candidates, extra)
    assert raw == pytest.approx({"n1": math.log(4), "n2": math.log(4), "n3": 0.0, "n4": 0.0})


def test_topology_spread_hostname_and_max_skew() -> None:
    nodes = [
        node("h1", pods=[_web("a", "h1"), _web("b", "h1")]),
        node("h2", pods=[_web("c", "h2")]),
        node("h3"),
    ]
    incoming = pod("in", labels={"app": "web"}, spec={"topologySpreadConstraints": [_constraint(HOST, skew=3)]})
    raw, normalized = run("PodTopologySpread", incoming, nodes)
    weight = math.log(3 + 2)  # three candidate hosts
    assert raw == pytest.approx({"h1": 2 * weight + 2, "h2": weight + 2, "h3": 2.0})
    high, low = 2 * weight + 2, 2.0
    assert normalized == pytest.approx({name: 10 * (high + low - s) / high for name, s in raw.items()})


def test_topology_spread_empty_selector_counts_nothing() -> None:
    candidates, extra = _topology_nodes()
    incoming = pod("in", spec={"topologySpreadConstraints": [_constraint(selector={})]})
    raw, normalized = run("PodTopologySpread", incoming, candidates, extra)
    assert raw == {"n1": 0.0, "n2": 0.0, "n3": 0.0, "n4": 0.0}
    assert normalized == {"n1": 10.0, "n2": 10.0, "n3": 10.0, "n4": 0.0}


def test_topology_spread_without_soft_constraints_is_skipped() -> None:
    candidates, extra = _topology_nodes()
    for spec in ({}, {"topologySpreadConstraints": [_constraint(when="DoNotSchedule")]}):
        raw, normalized = run("PodTopologySpread", pod("in", labels={"app": "web"}, spec=spec), candidates, extra)
        assert set(raw.values()) == {0.0}
        assert set(normalized.values()) == {0.0}
