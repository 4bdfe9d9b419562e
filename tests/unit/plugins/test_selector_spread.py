"""SelectorSpread: the pods its default selector picks (Services, controller) spread over nodes and zones."""

from __future__ import annotations

import pytest

from extenders.model import ControllerInfo, NodeInfo, ServiceInfo
from extenders.plugins.registry import SCORERS
from extenders.plugins.selector_spread import zone_key
from extenders.snapshot import Snapshot
from tests.unit.plugins.scoring import CTX, ZONE, run
from tests.unit.plugins.spread import node, pod

WEB = {"app": "web"}


RS_TABLES = {"replica_sets": {"default/rs": ControllerInfo("default", "rs", {"matchLabels": {"app": "web"}})}}


def _spread_nodes(zoned: bool = True) -> list[NodeInfo]:
    def z(zone: str) -> dict[str, str]:
        return {ZONE: zone} if zoned else {}

    return [
        node("n1", z("a"), [pod("p1", "n1", WEB, owner_uid="rs1"), pod("p2", "n1", WEB, owner_uid="old-rs")]),
        node("n2", z("a"), [pod("p3", "n2", {"app": "db"}, owner_uid="rs1")]),  # same owner, not selected
        node(
            "n3",
            z("b"),
            [
                pod("p4", "n3", WEB),  # no owner, selected all the same
                pod("p5", "n3", WEB, deleting=True),  # terminating: not counted
                pod("p6", "n3", WEB, namespace="elsewhere"),  # other namespace: not counted
                pod("p7", "n3"),
            ],
        ),
    ]


def test_selector_spread_counts_the_pods_its_default_selector_picks_and_weights_zones() -> None:
    raw, normalized = run("SelectorSpread", pod("in", labels=WEB, owner_uid="rs1"), _spread_nodes(), tables=RS_TABLES)
    assert raw == {"n1": 2.0, "n2": 0.0, "n3": 1.0}
    # node scores 0, 10, 5; zone a holds 2 (score 0), zone b 1 (score 5); zone weighted 2/3
    assert normalized == pytest.approx({"n1": 0.0, "n2": 10 / 3, "n3": 5.0})
    # a Service selecting the same pods gives the same counts, with or without the controller
    service = {"services": {"default/web": ServiceInfo("default", "web", {"app": "web"})}}
    assert run("SelectorSpread", pod("in", labels=WEB), _spread_nodes(), tables=service)[0] == raw


def test_selector_spread_without_zones_uses_node_counts_only() -> None:
    _, normalized = run(
        "SelectorSpread", pod("in", labels=WEB, owner_uid="rs1"), _spread_nodes(zoned=False), tables=RS_TABLES
    )
    assert normalized == pytest.approx({"n1": 0.0, "n2": 10.0, "n3": 5.0})


def test_selector_spread_mixes_zoned_and_unzoned_nodes() -> None:
    nodes = [
        node("n1", {ZONE: "a"}, [pod("p1", "n1", WEB)]),
        node("n2", {}, [pod("p2", "n2", WEB), pod("p3", "n2", WEB)]),
        node("n3", {ZONE: "b"}),
    ]
    _, normalized = run("SelectorSpread", pod("in", labels=WEB, owner_uid="rs1"), nodes, tables=RS_TABLES)
    # node scores 5, 0, 10; zones a=1 (0), b=0 (10); n2 has no zone: node score only
    assert normalized == pytest.approx({"n1": 5 / 3, "n2": 0.0, "n3": 10.0})


def test_selector_spread_with_an_empty_selector_scores_max_and_with_constraints_zero() -> None:
    # owned by a ReplicaSet the snapshot does not hold, and selected by no Service: nothing to count
    _, unselected = run("SelectorSpread", pod("in", labels=WEB, owner_uid="rs1"), _spread_nodes())
    assert unselected == {"n1": 10.0, "n2": 10.0, "n3": 10.0}
    constrained = pod(
        "in",
        labels=WEB,
        owner_uid="rs1",
        spec={
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
            ]
        },
    )
    raw, skipped = run("SelectorSpread", constrained, _spread_nodes(), tables=RS_TABLES)
    assert raw == {"n1": 0.0, "n2": 0.0, "n3": 0.0}
    assert skipped == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


def test_selector_spread_hooks_agree_with_score_and_normalize() -> None:
    spread = SCORERS["SelectorSpread"]
    nodes = _spread_nodes()
    snapshot = Snapshot(nodes={n.name: n for n in nodes}, objects={"replica_sets": RS_TABLES["replica_sets"]})
    incoming = pod("in", labels=WEB, owner_uid="rs1")
    state = spread.prepare(incoming, snapshot, nodes, CTX)
    assert spread.score_all is not None and spread.constant is not None
    assert spread.score_all(incoming, nodes, state, CTX) == [spread.score(incoming, n, state, CTX) for n in nodes]
    assert spread.constant(incoming, snapshot, nodes, state, CTX) is None
    empty = Snapshot(nodes=snapshot.nodes)
    state = spread.prepare(incoming, empty, nodes, CTX)
    assert spread.constant(incoming, empty, nodes, state, CTX) == (0.0, 10.0)
    raw = {n.name: spread.score(incoming, n, state, CTX) for n in nodes}
    assert set(spread.normalize(raw, state).values()) == {10.0}


def test_zone_key() -> None:
    assert zone_key({}) == ""
    assert zone_key({ZONE: "a"}) == zone_key({"failure-domain.beta.kubernetes.io/zone": "a"})
    assert zone_key({ZONE: "a", "topology.kubernetes.io/region": "r1"}) != zone_key({ZONE: "a"})
    # as GetZoneKey: a beta label, when the node has it, wins over the GA one (even when empty)
    assert zone_key({ZONE: "a", "failure-domain.beta.kubernetes.io/zone": "b"}) == zone_key({ZONE: "b"})
    assert zone_key({ZONE: "a", "failure-domain.beta.kubernetes.io/zone": ""}) == ""
