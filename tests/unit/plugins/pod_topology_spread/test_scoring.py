"""PodTopologySpread scoring (ScheduleAnyway constraints) against hand-computed scores."""

from __future__ import annotations

import math
from typing import Any

import pytest

from extenders.model import NodeInfo, PodInfo
from tests.unit.plugins.scoring import HOST, ZONE, run
from tests.unit.plugins.spread import node, pod


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
