"""PodTopologySpread scoring (ScheduleAnyway constraints) against hand-computed scores."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from extenders.model import ControllerInfo, NodeFacts, NodeInfo, PodInfo, ServiceInfo, Taint
from extenders.plugins.framework import ScoringContext
from extenders.plugins.pod_topology_spread.scoring import TopologySpreadScorer, whole
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot
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
    # zone a: w1, w2, w3 (v2 still matches app=web); zone b: w7; each raw score rounded (4 and 1)
    high, low = whole(3 * weight), whole(1 * weight)
    assert raw == pytest.approx({"n1": high, "n2": high, "n3": low, "n4": 0.0})
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
    assert raw["n3"] == pytest.approx(whole(2 * math.log(4)))
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
    assert raw == pytest.approx({"n1": whole(math.log(4)), "n2": whole(math.log(4)), "n3": 0.0, "n4": 0.0})


def test_topology_spread_hostname_and_max_skew() -> None:
    nodes = [
        node("h1", pods=[_web("a", "h1"), _web("b", "h1")]),
        node("h2", pods=[_web("c", "h2")]),
        node("h3"),
    ]
    incoming = pod("in", labels={"app": "web"}, spec={"topologySpreadConstraints": [_constraint(HOST, skew=3)]})
    raw, normalized = run("PodTopologySpread", incoming, nodes)
    weight = math.log(3 + 2)  # three candidate hosts
    expected = {"h1": whole(2 * weight + 2), "h2": whole(weight + 2), "h3": 2.0}  # 5, 4, 2
    assert raw == pytest.approx(expected)
    high, low = expected["h1"], 2.0
    assert normalized == pytest.approx({name: 10 * (high + low - s) / high for name, s in expected.items()})


@pytest.mark.parametrize("selector", [None, {}])
def test_topology_spread_missing_or_empty_selector_counts_nothing(selector: dict[str, Any] | None) -> None:
    candidates, extra = _topology_nodes()
    constraint = _constraint(selector={"drop": "me"})
    if selector is None:
        del constraint["labelSelector"]
    else:
        constraint["labelSelector"] = selector
    raw, normalized = run(
        "PodTopologySpread", pod("in", spec={"topologySpreadConstraints": [constraint]}), candidates, extra
    )
    assert raw == {"n1": 0.0, "n2": 0.0, "n3": 0.0, "n4": 0.0}
    assert normalized == {"n1": 10.0, "n2": 10.0, "n3": 10.0, "n4": 0.0}


def test_topology_spread_match_label_keys_give_an_empty_selector_requirements() -> None:
    candidates, extra = _topology_nodes()
    constraint = _constraint(selector={}, matchLabelKeys=["version"])
    incoming = pod("in", labels={"version": "v2"}, spec={"topologySpreadConstraints": [constraint]})
    raw, _ = run("PodTopologySpread", incoming, candidates, extra)
    weight = math.log(2 + 2)  # two candidate zones; only w3 (zone a) carries version=v2
    assert raw == pytest.approx({"n1": whole(weight), "n2": whole(weight), "n3": 0.0, "n4": 0.0})


def test_topology_spread_without_soft_constraints_is_skipped() -> None:
    candidates, extra = _topology_nodes()
    for spec in ({}, {"topologySpreadConstraints": [_constraint(when="DoNotSchedule")]}):
        raw, normalized = run("PodTopologySpread", pod("in", labels={"app": "web"}, spec=spec), candidates, extra)
        assert set(raw.values()) == {0.0}
        assert set(normalized.values()) == {0.0}


WEB_SERVICE = {"services": {"default/web": ServiceInfo("default", "web", {"app": "web"})}}


def _default_nodes() -> tuple[list[NodeInfo], list[NodeInfo]]:
    candidates = [
        node("n1", {ZONE: "a"}, [_web("w1", "n1"), _web("w2", "n1"), pod("o1", "n1", {"app": "db"})]),
        node("n2", {ZONE: "a"}, [_web("w3", "n2"), pod("w9", "n2", {"app": "web"}, deleting=True)]),
        node("n3", {ZONE: "b"}),
        node("n4", {}, [_web("w4", "n4")]),  # no zone label: spread by hostname only, not ignored
    ]
    extra = [
        node("n5", {ZONE: "b"}, [_web("w5", "n5")]),
        node("n6", {}, [_web("w6", "n6")]),  # no zone label, not a candidate: counts towards the '' domain
        node("n7", {ZONE: "c"}, [_web("w7", "n7")]),  # a domain of no candidate
    ]
    return candidates, extra


def test_a_pod_without_constraints_gets_the_system_defaults_with_its_service_selector() -> None:
    candidates, extra = _default_nodes()
    raw, normalized = run("PodTopologySpread", pod("in", labels={"app": "web"}), candidates, extra, tables=WEB_SERVICE)
    host = math.log(4 + 2)  # every candidate counts as a hostname domain, none is ignored
    zone = math.log(3 + 2)  # a, b and '' (the candidate without the label)
    # hostname maxSkew 3 adds 2, zone maxSkew 5 adds 4; zone counts: a 3, b 1, '' 2 (w4, w6);
    # each node's sum rounded (14, 13, 8, 4)
    expected = {
        "n1": whole(2 * host + 2 + 3 * zone + 4),
        "n2": whole(1 * host + 2 + 3 * zone + 4),
        "n3": whole(0 * host + 2 + 1 * zone + 4),
        "n4": whole(1 * host + 2),  # no zone label: the zone constraint adds nothing
    }
    assert raw == pytest.approx(expected)
    high, low = max(expected.values()), min(expected.values())
    assert normalized == pytest.approx({n: 10 * (high + low - s) / high for n, s in expected.items()})
    # no defaults when no Service or controller selects the pod, or when it declares any constraint
    db_only = {"services": {"default/db": ServiceInfo("default", "db", {"app": "db"})}}
    raw, normalized = run("PodTopologySpread", pod("in", labels={"app": "web"}), candidates, extra, tables=db_only)
    assert set(raw.values()) == {0.0} and set(normalized.values()) == {0.0}
    hard = pod("in", labels={"app": "web"}, spec={"topologySpreadConstraints": [_constraint(when="DoNotSchedule")]})
    raw, normalized = run("PodTopologySpread", hard, candidates, extra, tables=WEB_SERVICE)
    assert set(raw.values()) == {0.0} and set(normalized.values()) == {0.0}
    # declared soft constraints keep requiring every key: n4 is ignored there
    soft = pod("in", labels={"app": "web"}, spec={"topologySpreadConstraints": [_constraint()]})
    raw, normalized = run("PodTopologySpread", soft, candidates, extra, tables=WEB_SERVICE)
    assert raw["n4"] == 0.0 and normalized["n4"] == 0.0 and raw["n3"] == pytest.approx(whole(math.log(2 + 2)))


def test_a_zone_label_with_an_empty_value_reads_the_domain_of_nodes_without_one() -> None:
    candidates, extra = _default_nodes()
    candidates.append(node("n8", {ZONE: ""}))
    raw, _ = run("PodTopologySpread", pod("in", labels={"app": "web"}), candidates, extra, tables=WEB_SERVICE)
    host, zone = math.log(5 + 2), math.log(3 + 2)
    assert raw["n8"] == pytest.approx(whole(2 + 2 * zone + 4))  # w4 and w6 sit on nodes without the label
    assert raw["n4"] == pytest.approx(whole(host + 2))


def test_the_defaults_honour_the_pods_node_affinity_when_counting() -> None:
    candidates, extra = _default_nodes()
    for info in extra:
        assert info.node is not None
        info.node.labels["pool"] = "other"
    incoming = pod("in", labels={"app": "web"}, spec={"nodeSelector": {"pool": "main"}})
    for info in candidates:
        assert info.node is not None
        info.node.labels["pool"] = "main"
    raw, _ = run("PodTopologySpread", incoming, candidates, extra, tables=WEB_SERVICE)
    zone = math.log(3 + 2)
    assert raw["n3"] == pytest.approx(2 + 0 * zone + 4)  # w5 on n5 fails the nodeSelector: not counted


def test_the_defaults_use_the_controllers_selector() -> None:
    candidates, extra = _default_nodes()
    owned = pod("in", labels={"app": "web"}, owner_uid="rs-uid")
    tables = {"replica_sets": {"default/rs": ControllerInfo("default", "rs", {"matchLabels": {"app": "web"}})}}
    by_controller, _ = run("PodTopologySpread", owned, candidates, extra, tables=tables)
    by_service, _ = run("PodTopologySpread", owned, candidates, extra, tables=WEB_SERVICE)
    assert by_controller == pytest.approx(by_service) and by_controller["n1"] > 0


def test_raw_scores_are_rounded_before_normalisation_as_kube_scheduler_does() -> None:
    """kube-scheduler's Score returns ``int64(math.Round(sum))``: nodes whose sums differ by a fraction
    can tie, and a fractional gap can become a whole point, which normalisation then magnifies."""
    nodes = [
        node("y", {ZONE: "a"}, [_web("p1", "y")]),
        node("w", {ZONE: "a"}),
        node("x", {ZONE: "b"}),
    ]
    extra = [node("e", {ZONE: "b"}, [_web("p2", "e"), _web("p3", "e")])]
    constraints = [_constraint(HOST, skew=3), _constraint(ZONE, skew=1)]
    incoming = pod("in", labels={"app": "web"}, spec={"topologySpreadConstraints": constraints})
    host, zone = math.log(3 + 2), math.log(2 + 2)  # three candidate hosts, two candidate zones
    # hostname maxSkew 3 adds 2; zone counts: a 1 (p1), b 2 (p2, p3)
    sums = {"y": 1 * host + 2 + 1 * zone, "w": 0 * host + 2 + 1 * zone, "x": 0 * host + 2 + 2 * zone}
    # unrounded: y 4.996, w 3.386, x 4.773 -> normalised y 6.78, w 10, x 7.23 (x preferred over y);
    # rounded:   y 5,     w 3,     x 5     -> normalised y 6,    w 10, x 6    (y and x tie), which is
    # what kube-scheduler's int64 NormalizeScore gives too: 10 * (5 + 3 - 5) / 5 = 6, 10 * 5 / 5 = 10
    unrounded_high, unrounded_low = max(sums.values()), min(sums.values())
    unrounded = {n: 10 * (unrounded_high + unrounded_low - s) / unrounded_high for n, s in sums.items()}
    assert unrounded["x"] > unrounded["y"] + 0.4
    expected_raw = {n: whole(s) for n, s in sums.items()}
    assert expected_raw == {"y": 5.0, "w": 3.0, "x": 5.0}
    raw, normalized = run("PodTopologySpread", incoming, nodes, extra)
    assert raw == expected_raw
    assert normalized == {"y": 6.0, "w": 10.0, "x": 6.0}
    # the engine's batch path (score_all, normalize_values) rounds the same way
    scorer = TopologySpreadScorer()
    snapshot = Snapshot(nodes={n.name: n for n in [*nodes, *extra]})
    ctx = ScoringContext(resource_weights={"cpu": 1, "memory": 1})
    state = scorer.prepare(incoming, snapshot, nodes, ctx)
    values = scorer.score_all(incoming, nodes, state, ctx)
    assert values == [5.0, 3.0, 5.0]
    assert scorer.normalize_values(values, state) == [6.0, 10.0, 6.0]


# ----------------------------------------------------------------- counts kept across snapshots
SPREAD_APPS = ("a", "b")


def _walk_pod(rng: random.Random, uid: str, node_name: str) -> PodInfo:
    return PodInfo(
        namespace=rng.choice(("ns1", "ns2")),
        name=uid,
        uid=uid,
        labels={"app": rng.choice(SPREAD_APPS)},
        node_name=node_name,
        deletion_timestamp="2026-01-01T00:00:00Z" if rng.random() < 0.1 else None,
    )


def _walk_node(rng: random.Random, name: str, serial: list[int]) -> NodeInfo:
    labels = {HOST: name, "disk": rng.choice(("ssd", "hdd"))}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(("z1", "z2", "z3"))
    taints = [Taint("dedicated", "x", "NoSchedule")] if rng.random() < 0.2 else []
    pods = []
    for _ in range(rng.randrange(4)):
        serial[0] += 1
        pods.append(_walk_pod(rng, f"p{serial[0]}", name))
    return NodeInfo.build(name, NodeFacts(name=name, labels=labels, taints=taints), pods)


def _walked_counts(snapshot: Snapshot, incoming: PodInfo, honor_affinity: bool, honor_taints: bool) -> Counter[str]:
    """Live pods of the incoming pod's namespace labelled app=a per zone, over the nodes its
    policies include: counted independently of the plug-in."""
    counts: Counter[str] = Counter()
    for info in snapshot.nodes.values():
        facts = info.node
        if facts is None or ZONE not in facts.labels:
            continue
        if honor_affinity and any(facts.labels.get(k) != v for k, v in incoming.node_selector.items()):
            continue
        if honor_taints and facts.taints:
            continue
        counts[facts.labels[ZONE]] += sum(
            1
            for p in info.pods.values()
            if p.namespace == incoming.namespace and p.labels.get("app") == "a" and p.deletion_timestamp is None
        )
    return counts


def test_domain_counts_follow_every_change_of_sealed_snapshots() -> None:
    """The per-domain counts, kept in the summary's tally and patched from the changed nodes of each
    new snapshot, equal a fresh count after every change, for every combination of policies."""
    rng = random.Random(11)
    serial = [0]
    nodes = {f"n{i}": _walk_node(rng, f"n{i}", serial) for i in range(25)}
    snapshot = Snapshot(nodes=nodes, sealed=True)
    scorer = SCORERS["PodTopologySpread"]
    compared = 0
    for step in range(250):
        for namespace, honor_affinity, honor_taints in [
            ("ns1", True, False),
            ("ns2", True, False),  # the same constraint from another namespace counts other pods
            ("ns2", False, True),
            ("ns1", False, False),
        ]:
            constraint = _constraint(
                selector={"matchLabels": {"app": "a"}},
                nodeAffinityPolicy="Honor" if honor_affinity else "Ignore",
                nodeTaintsPolicy="Honor" if honor_taints else "Ignore",
            )
            incoming = PodInfo(
                namespace=namespace,
                name="in",
                uid="in",
                labels={"app": "a"},
                node_selector={"disk": "ssd"},
                topology_spread=[constraint],
            )
            candidates = list(snapshot.nodes.values())
            ctx = ScoringContext(resource_weights={"cpu": 1}, summary=snapshot.summary())
            state = scorer.prepare(incoming, snapshot, candidates, ctx)
            walked = _walked_counts(snapshot, incoming, honor_affinity, honor_taints)
            assert state.pair_counts == {pair: walked[pair[1]] for pair in state.pair_counts}, step
            compared += sum(state.pair_counts.values())
        changed = rng.choice(sorted(snapshot.nodes))
        fresh = dict(snapshot.nodes)
        roll = rng.random()
        if roll < 0.1 and len(fresh) > 10:
            del fresh[changed]  # the next summary starts over
        elif roll < 0.15:
            serial[0] += 1
            changed = f"x{serial[0]}"
            fresh[changed] = _walk_node(rng, changed, serial)
        else:  # a node replaced: other pods, labels or taints
            fresh[changed] = _walk_node(rng, changed, serial)
        snapshot = Snapshot(
            nodes=fresh,
            sealed=True,
            summary_seed=snapshot.seed(),
            node_changes=snapshot.changes_since_seed([changed]),
        )
    assert compared > 1000
