"""SelectorSpread: pods of the same controller spread over nodes and zones."""

from __future__ import annotations

import pytest

from extenders.model import NodeInfo
from extenders.plugins.selector_spread import zone_key
from tests.unit.plugins.scoring import ZONE, run
from tests.unit.plugins.spread import node, pod


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
