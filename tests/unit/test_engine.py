"""The engine: filter buckets and reasons, prioritize arithmetic, explain's shape, fits()."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from extenders import engine
from extenders.features import NEWEST, Features
from extenders.model import NodeInfo, Owner, PodInfo
from extenders.plugins.framework import Scorer, ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.policy import Policy, default_policy, parse_policy
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, make_snapshot

SMALL = {"cpu": "1", "memory": "1Gi", "pods": "10"}


def cluster() -> Snapshot:
    return make_snapshot(
        make_node("fits", labels={"disk": "ssd"}),
        make_node("full", labels={"disk": "ssd"}, allocatable=SMALL, pods=[make_pod("x", requests={"cpu": "800m"})]),
        make_node("tiny", labels={"disk": "ssd"}, allocatable=SMALL),
        make_node("hdd", labels={"disk": "hdd"}),
        make_node("tainted", labels={"disk": "ssd"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        make_node("both", labels={"disk": "hdd"}, allocatable=SMALL),
        NodeInfo.build("podsonly", None, [make_pod("y", node_name="podsonly")]),
    )


POD = make_pod(requests={"cpu": "500m"}, spec={"nodeSelector": {"disk": "ssd"}})


@pytest.mark.parametrize(
    ("features", "taint_reason"),
    [
        (Features(28, 7), "node(s) had untolerated taint {k: v}"),  # before 1.34.2 the taint is named
        (NEWEST, "node(s) had untolerated taint(s)"),
    ],
    ids=["1.28.7", "newest"],
)
def test_filter_buckets_and_reasons(features: Features, taint_reason: str) -> None:
    names = ["fits", "full", "tiny", "hdd", "tainted", "podsonly", "nowhere"]
    result = engine.filter_nodes(default_policy(), POD, replace(cluster(), features=features), names)
    assert result.passing == ["fits", "tiny"]
    assert result.failed == {"full": "Insufficient cpu"}
    assert result.unresolvable == {
        "hdd": "node(s) didn't match Pod's node affinity/selector",
        "tainted": taint_reason,
        "podsonly": engine.NODE_NOT_FOUND,
        "nowhere": engine.NODE_NOT_FOUND,
    }


def test_first_failure_versus_all_failures() -> None:
    big = make_pod(requests={"cpu": "2"}, spec={"nodeSelector": {"disk": "ssd"}})
    first = engine.filter_nodes(default_policy(), big, cluster(), ["both"])
    assert first.unresolvable == {"both": "node(s) didn't match Pod's node affinity/selector"}
    every = engine.filter_nodes(
        default_policy().model_copy(update={"always_check_all_predicates": True}), big, cluster(), ["both"]
    )
    assert every.unresolvable == {"both": "node(s) didn't match Pod's node affinity/selector, Insufficient cpu"}


def test_all_failures_resolvable_stay_in_failed() -> None:
    policy = parse_policy({"predicates": ["PodFitsResources", "PodFitsHostPorts"], "alwaysCheckAllPredicates": True})
    ported = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}
    node = make_node("n", allocatable={"cpu": "1", "memory": "1Gi", "pods": "1"}, pods=[make_pod("e", spec=ported)])
    result = engine.filter_nodes(policy, make_pod(spec=ported), make_snapshot(node), ["n"])
    assert result.failed == {"n": "Too many pods, node(s) didn't have free ports for the requested pod ports"}


def test_empty_policy_passes_known_nodes_only() -> None:
    policy = parse_policy({"predicates": [], "priorities": []})
    result = engine.filter_nodes(policy, POD, cluster(), ["hdd", "nowhere"])
    assert result.passing == ["hdd"] and result.unresolvable == {"nowhere": engine.NODE_NOT_FOUND}
    assert engine.prioritize_nodes(policy, POD, cluster(), ["hdd", "nowhere"]) == [("hdd", 0), ("nowhere", 0)]


def test_invalid_selector_fails_every_node_unresolvably() -> None:
    bad = make_pod(
        spec={
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}, "topologyKey": "z"}
                    ]
                }
            }
        }
    )
    result = engine.filter_nodes(default_policy(), bad, cluster(), ["fits"])
    assert "invalid pod spec" in result.unresolvable["fits"]


class FixedPriority:
    """Scores nodes from a table; normalises by passing the table's values through."""

    def __init__(self, name: str, table: dict[str, float]) -> None:
        self.name = name
        self.table = table
        self.prepared = 0

    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> Any:
        self.prepared += 1
        return ctx

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        return self.table[node.name]

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return dict(raw)


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> tuple[FixedPriority, FixedPriority]:
    a = FixedPriority("TestA", {"fits": 10, "tiny": 0, "hdd": 5})
    b = FixedPriority("TestB", {"fits": 0, "tiny": 10, "hdd": 5})
    monkeypatch.setitem(SCORERS, "TestA", Scorer.of("TestA", a))
    monkeypatch.setitem(SCORERS, "TestB", Scorer.of("TestB", b))
    return a, b


def test_prioritize_weighted_mean_rounded_half_up(fixed: tuple[FixedPriority, FixedPriority]) -> None:
    policy = parse_policy({"priorities": [{"name": "TestA", "weight": 3}, {"name": "TestB", "weight": 1}]})
    scores = engine.prioritize_nodes(policy, POD, cluster(), ["fits", "tiny", "hdd", "nowhere"])
    # fits: 30/4 = 7.5 -> 8; tiny: 10/4 = 2.5 -> 3; hdd: 20/4 = 5; unknown: 0
    assert scores == [("fits", 8), ("tiny", 3), ("hdd", 5), ("nowhere", 0)]
    assert fixed[0].prepared == 1 and fixed[1].prepared == 1


def test_priorities_that_score_every_candidate_alike_leave_the_average(
    fixed: tuple[FixedPriority, FixedPriority], monkeypatch: pytest.MonkeyPatch
) -> None:
    flat = FixedPriority("TestFlat", {"fits": 10, "tiny": 10, "hdd": 10})
    monkeypatch.setitem(SCORERS, "TestFlat", Scorer.of("TestFlat", flat))
    policy = parse_policy({"priorities": [{"name": "TestA", "weight": 1}, {"name": "TestFlat", "weight": 3}]})
    # TestFlat cannot tell fits from tiny, so only TestA decides: the full 0..10 range, not 7.5 vs 10.
    assert engine.prioritize_nodes(policy, POD, cluster(), ["fits", "tiny"]) == [("fits", 10), ("tiny", 0)]
    # When every priority is flat, the plain weighted average is kept.
    only_flat = parse_policy({"priorities": [{"name": "TestFlat", "weight": 3}]})
    assert engine.prioritize_nodes(only_flat, POD, cluster(), ["fits", "tiny"]) == [("fits", 10), ("tiny", 10)]


def test_prioritize_values_are_in_the_names_order_and_unknown_nodes_score_0(
    fixed: tuple[FixedPriority, FixedPriority],
) -> None:
    policy = parse_policy({"priorities": [{"name": "TestA", "weight": 3}, {"name": "TestB", "weight": 1}]})
    snapshot = cluster()
    # Every name known: the scores are made in the names' order, with no mapping by name.
    assert engine.prioritize_values(policy, POD, snapshot, ["hdd", "fits", "tiny"]) == [5, 8, 3]
    # A name the snapshot does not know (or knows only from its pods) scores 0, the others as before.
    assert engine.prioritize_values(policy, POD, snapshot, ["nowhere", "hdd", "podsonly", "fits"]) == [0, 5, 0, 8]
    # A name listed twice (kube-scheduler never does) still adds its scores twice: fits 60/4, capped.
    assert engine.prioritize_nodes(policy, POD, snapshot, ["fits", "fits", "tiny"]) == [
        ("fits", 10),
        ("fits", 10),
        ("tiny", 3),
    ]


def test_averages_outside_0_to_10_are_clamped_and_not_a_number_scores_0(monkeypatch: pytest.MonkeyPatch) -> None:
    odd = FixedPriority("TestOdd", {"fits": 12.0, "tiny": -3.0, "hdd": float("nan"), "both": 10.4})
    monkeypatch.setitem(SCORERS, "TestOdd", Scorer.of("TestOdd", odd))
    policy = parse_policy({"priorities": [{"name": "TestOdd", "weight": 1}]})
    scores = engine.prioritize_nodes(policy, POD, cluster(), ["fits", "tiny", "hdd", "both"])
    assert scores == [("fits", 10), ("tiny", 0), ("hdd", 0), ("both", 10)]
    in_range = FixedPriority("TestOdd", {"fits": 9.5, "tiny": 0.49, "hdd": 10.0, "both": 0.0})
    monkeypatch.setitem(SCORERS, "TestOdd", Scorer.of("TestOdd", in_range))
    assert engine.prioritize_values(policy, POD, cluster(), ["fits", "tiny", "hdd", "both"]) == [10, 0, 10, 0]


def test_explain_shape_and_agreement(fixed: tuple[FixedPriority, FixedPriority]) -> None:
    policy = parse_policy({"priorities": [{"name": "TestA", "weight": 1}, {"name": "TestB", "weight": 1}]})
    snapshot = cluster()
    out = engine.explain(policy, POD, snapshot, ["fits", "tiny", "hdd", "nowhere"])
    nodes = out["nodes"]
    assert set(nodes) == {"fits", "tiny", "hdd", "nowhere"}
    assert nodes["fits"]["fit"] is True and nodes["fits"]["score"] == 5
    assert nodes["fits"]["priorities"] == {
        "TestA": {"plugin": "TestA", "raw": 10, "score": 10},
        "TestB": {"plugin": "TestB", "raw": 0, "score": 0},
    }
    assert list(nodes["fits"]["predicates"]) == policy.predicate_names
    assert nodes["fits"]["first_failure"] is None
    assert all(
        {k: v[k] for k in ("fit", "reason", "unresolvable")} == {"fit": True, "reason": "", "unresolvable": False}
        for v in nodes["fits"]["predicates"].values()
    )
    hdd = nodes["hdd"]
    assert hdd["fit"] is False and hdd["priorities"] == {} and hdd["score"] == 0
    selector = "node(s) didn't match Pod's node affinity/selector"
    assert hdd["predicates"]["MatchNodeSelector"] == {
        "plugin": "NodeAffinity",
        "fit": False,
        "reason": selector,
        "unresolvable": True,
    }
    assert hdd["first_failure"] == {"predicate": "MatchNodeSelector", "plugin": "NodeAffinity", "reason": selector}
    assert nodes["nowhere"]["fit"] is False
    # Scores over the fitting nodes match prioritize on the same list.
    assert engine.prioritize_nodes(policy, POD, snapshot, ["fits", "tiny"]) == [
        (n, nodes[n]["score"]) for n in ("fits", "tiny")
    ]
    # Without node names every snapshot node is explained.
    assert set(engine.explain(policy, POD, snapshot)["nodes"]) == set(snapshot.nodes)


def test_default_policy_scores_are_in_range() -> None:
    snapshot = cluster()
    scores = engine.prioritize_nodes(default_policy(), POD, snapshot, ["fits", "tiny", "full"])
    assert [n for n, _ in scores] == ["fits", "tiny", "full"]
    assert all(isinstance(s, int) and 0 <= s <= 10 for _, s in scores)


def test_fits_with_victims_removed() -> None:
    policy: Policy = default_policy()
    snapshot = cluster()
    pod = make_pod(requests={"cpu": "500m"})
    full = snapshot.nodes["full"]
    assert [v.reason for v in engine.fits(policy, pod, full, snapshot)] == ["Insufficient cpu"]
    emptied = NodeInfo.build("full", full.node, [])
    prepared = engine.prepare_pod(policy, pod, snapshot)
    assert engine.fits(policy, pod, emptied, snapshot, prepared) == []
    assert engine.fits(policy, pod, full, snapshot, prepared)[0].reason == "Insufficient cpu"


# ------------------------------------------------------------------ NodePreferAvoidPods as a veto
AVOID = (
    '{"preferAvoidPods": [{"podSignature": {"podController": '
    '{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true}}}]}'
)


OWNER = Owner("ReplicaSet", "rs", "rs-uid")


def _owned_pod(cpu: str = "100m") -> PodInfo:
    return replace(make_pod("incoming", requests={"cpu": cpu, "memory": "100Mi"}), owner=OWNER)


def _loaded_node(name: str, cpu_m: int, avoid: bool = False) -> NodeInfo:
    load = [make_pod(f"{name}-load", requests={"cpu": f"{cpu_m}m", "memory": "1Gi"}, node_name=name)] if cpu_m else []
    info = make_node(name, pods=load)
    if avoid:
        assert info.node is not None
        info.node.annotations["scheduler.alpha.kubernetes.io/preferAvoidPods"] = AVOID
    return info


def _with_veto() -> Policy:
    """The default priorities plus the legacy veto, as classic policy files list it."""
    priorities = [{"name": n, "weight": w} for n, w in default_policy().priority_weights]
    return parse_policy({"priorities": [*priorities, {"name": "NodePreferAvoidPods", "weight": 10000}]})


def test_the_veto_ranks_by_load_over_500_nodes() -> None:
    """The classic 10000 weight must not flatten every other priority into the rounding."""
    nodes = [_loaded_node(f"n{i}", (i % 40) * 100) for i in range(500)]
    snapshot = make_snapshot(*nodes)
    scores = dict(engine.prioritize_nodes(_with_veto(), _owned_pod(), snapshot, [n.name for n in nodes]))
    assert len(set(scores.values())) > 1
    assert scores["n0"] > scores["n39"]  # idle beats busy
    by_load = [scores[f"n{i}"] for i in range(40)]
    assert by_load == sorted(by_load, reverse=True)  # never a busier node above an idler one
    assert all(1 <= s <= 10 for s in scores.values())


def test_avoided_node_ranks_strictly_below_equal_twin() -> None:
    snapshot = make_snapshot(
        _loaded_node("plain", 0), _loaded_node("avoided", 0, avoid=True), _loaded_node("busy", 3900)
    )
    names = ["plain", "avoided", "busy"]
    scores = dict(engine.prioritize_nodes(_with_veto(), _owned_pod(), snapshot, names))
    assert scores["avoided"] == 0
    assert scores["plain"] > scores["avoided"] and scores["busy"] > scores["avoided"]
    assert scores["plain"] > scores["busy"]
    # A pod of another controller is not avoided there: twins score the same.
    other = make_pod("other", requests={"cpu": "100m", "memory": "100Mi"})
    free = dict(engine.prioritize_nodes(_with_veto(), other, snapshot, names))
    assert free["avoided"] == free["plain"] >= 1
    # explain reports the veto priority's own score and the same final scores.
    explained = engine.explain(_with_veto(), _owned_pod(), snapshot, names)["nodes"]
    assert explained["avoided"]["priorities"]["NodePreferAvoidPods"]["score"] == 0
    veto = explained["avoided"]["priorities"]["NodePreferAvoidPods"]
    assert veto["plugin"] == "NodePreferAvoidPods (legacy, no longer in kube-scheduler)"
    assert {n: explained[n]["score"] for n in names} == scores


def test_veto_holds_even_when_every_other_score_is_zero(fixed: tuple[FixedPriority, FixedPriority]) -> None:
    veto = {"name": "NodePreferAvoidPods", "weight": 10000}
    policy = parse_policy({"priorities": [{"name": "TestB", "weight": 1}, veto]})
    snapshot = cluster()
    assert snapshot.nodes["tiny"].node is not None
    snapshot.nodes["tiny"].node.annotations["scheduler.alpha.kubernetes.io/preferAvoidPods"] = AVOID
    pod = replace(POD, owner=OWNER)
    scores = dict(engine.prioritize_nodes(policy, pod, snapshot, ["fits", "tiny", "hdd"]))
    # TestB: fits 0, tiny 10, hdd 5. fits (0 from the others) still beats the avoided tiny.
    assert scores == {"fits": 1, "tiny": 0, "hdd": 5}
    # Without the veto priority the plain weighted mean applies, 0 included.
    plain = parse_policy({"priorities": [{"name": "TestB", "weight": 1}]})
    assert dict(engine.prioritize_nodes(plain, pod, snapshot, ["fits", "tiny", "hdd"])) == {
        "fits": 0,
        "tiny": 10,
        "hdd": 5,
    }


# ------------------------------------------------------------------ with_node overlay
def test_with_node_overlay_is_lazy_and_chains() -> None:
    policy = default_policy()
    snapshot = cluster()
    pod = make_pod(requests={"cpu": "500m"})
    prepared = engine.prepare_pod(policy, pod, snapshot)
    full = snapshot.nodes["full"]
    emptied = NodeInfo.build("full", full.node, [])
    overlay = prepared.with_node(emptied)
    assert overlay.first_failure(emptied) is None
    assert prepared.with_node(full) is prepared  # the snapshot's own node: nothing to derive
    # Chained overlays see the latest replacement; the snapshot is built only when read.
    back = overlay.with_node(full)
    failure = back.first_failure(full)
    assert failure is not None and failure.reason == "Insufficient cpu"
    assert overlay.snapshot.nodes["full"] is emptied and overlay.snapshot.nodes["fits"] is snapshot.nodes["fits"]
    assert back.snapshot.nodes["full"] is full
    assert snapshot.nodes["full"] is full  # the base snapshot is untouched
    result = engine.filter_prepared(overlay, ["full", "fits"])
    assert result.passing == ["full", "fits"]
