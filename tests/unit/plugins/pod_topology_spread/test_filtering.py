"""PodTopologySpread (DoNotSchedule): skew, minDomains, inclusion policies, missing labels."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import SKIP, Verdict
from extenders.plugins.pod_topology_spread.filtering import TopologySpreadFilter
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, make_snapshot, run_predicate

ZONE = "zone"
SKEW_FAIL = Verdict(False, "node(s) didn't match pod topology spread constraints")
LABEL_FAIL = Verdict(False, "node(s) didn't match pod topology spread constraints (missing required label)", True)
FIT = Verdict(True)


def spread_pod(labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None, **constraint: Any) -> PodInfo:
    c = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        **constraint,
    }
    return make_pod(
        "p",
        labels={"app": "web"} if labels is None else labels,
        spec={"topologySpreadConstraints": [c], **(spec or {})},
    )


def web(n: int, namespace: str = "default", **kw: Any) -> list[PodInfo]:
    return [
        make_pod(f"w{i}-{id(kw)}", namespace, labels={"app": "web", **kw.pop("labels", {})}, **kw) for i in range(n)
    ]


def verdicts(pod: PodInfo, snapshot: Snapshot) -> dict[str, Verdict]:
    return {name: run_predicate("PodTopologySpread", pod, node, snapshot) for name, node in snapshot.nodes.items()}


def zones(counts: dict[str, int], **node_kw: Any) -> Snapshot:
    return make_snapshot(*(make_node(f"n-{z}", labels={ZONE: z}, pods=web(c), **node_kw) for z, c in counts.items()))


def test_schedule_anyway_only_is_skipped() -> None:
    pod = spread_pod(whenUnsatisfiable="ScheduleAnyway")
    assert TopologySpreadFilter().prepare(pod, zones({"a": 3})) is SKIP


def test_max_skew() -> None:
    snapshot = zones({"a": 2, "b": 1, "c": 1})
    assert verdicts(spread_pod(), snapshot) == {"n-a": SKEW_FAIL, "n-b": FIT, "n-c": FIT}
    assert set(verdicts(spread_pod(maxSkew=2), snapshot).values()) == {FIT}


def test_pod_not_matching_its_own_selector_does_not_add_itself() -> None:
    snapshot = zones({"a": 2, "b": 1})
    assert verdicts(spread_pod(labels={"app": "other"}), snapshot) == {"n-a": FIT, "n-b": FIT}


def test_missing_topology_key_is_unresolvable() -> None:
    snapshot = make_snapshot(make_node("n-a", labels={ZONE: "a"}), make_node("bare"))
    assert verdicts(spread_pod(), snapshot) == {"n-a": FIT, "bare": LABEL_FAIL}


def test_min_domains_treats_global_minimum_as_zero() -> None:
    snapshot = zones({"a": 1, "b": 1})
    assert set(verdicts(spread_pod(), snapshot).values()) == {FIT}
    assert set(verdicts(spread_pod(minDomains=3), snapshot).values()) == {SKEW_FAIL}
    assert set(verdicts(spread_pod(minDomains=2), snapshot).values()) == {FIT}


def test_counts_only_same_namespace_and_live_pods() -> None:
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=web(2, "other") + web(2, deleting=True)),
        make_node("n-b", labels={ZONE: "b"}),
    )
    assert set(verdicts(spread_pod(), snapshot).values()) == {FIT}


def test_node_affinity_policy_honor_and_ignore() -> None:
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a", "disk": "ssd"}, pods=web(1)),
        make_node("n-b", labels={ZONE: "b", "disk": "hdd"}),
    )
    selector = {"nodeSelector": {"disk": "ssd"}}
    # Honor (default): zone b is not eligible, so the only domain is a with 1 pod.
    assert verdicts(spread_pod(spec=selector), snapshot)["n-a"] == FIT
    # Ignore: zone b counts with 0 pods, so a would reach skew 2.
    assert verdicts(spread_pod(spec=selector, nodeAffinityPolicy="Ignore"), snapshot)["n-a"] == SKEW_FAIL


def test_node_taints_policy() -> None:
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=web(1)),
        make_node("n-b", labels={ZONE: "b"}, taints=taint),
    )
    # Ignore (default): the tainted zone counts as an empty domain.
    assert verdicts(spread_pod(), snapshot)["n-a"] == SKEW_FAIL
    assert verdicts(spread_pod(nodeTaintsPolicy="Honor"), snapshot)["n-a"] == FIT
    tolerating = {"tolerations": [{"key": "k", "operator": "Exists"}]}
    assert verdicts(spread_pod(spec=tolerating, nodeTaintsPolicy="Honor"), snapshot)["n-a"] == SKEW_FAIL


def test_match_label_keys_narrow_the_selector() -> None:
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=web(2, labels={"rev": "1"})),
        make_node("n-b", labels={ZONE: "b"}),
    )
    pod = spread_pod(labels={"app": "web", "rev": "2"}, matchLabelKeys=["rev"])
    assert set(verdicts(pod, snapshot).values()) == {FIT}
    old = spread_pod(labels={"app": "web", "rev": "1"}, matchLabelKeys=["rev"])
    assert verdicts(old, snapshot)["n-a"] == SKEW_FAIL


def test_a_missing_selector_selects_nothing_even_with_match_label_keys() -> None:
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=web(2, labels={"rev": "1"})),
        make_node("n-b", labels={ZONE: "b"}, pods=web(2, labels={"rev": "2"})),
    )
    assert set(verdicts(spread_pod(labels={"rev": "2"}, labelSelector=None), snapshot).values()) == {FIT}
    keyed = spread_pod(labels={"rev": "2"}, labelSelector=None, matchLabelKeys=["rev"])
    assert set(verdicts(keyed, snapshot).values()) == {FIT}


def test_an_empty_selector_counts_no_pod() -> None:
    """kube-scheduler skips an empty selector when counting; the pod still matches it."""
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=web(2)),
        make_node("n-b", labels={ZONE: "b"}, pods=web(1)),
    )
    assert set(verdicts(spread_pod(labels={"other": "x"}, labelSelector={}), snapshot).values()) == {FIT}
    # With matchLabelKeys the empty selector gains requirements and counts again.
    keyed = spread_pod(labels={"app": "web"}, labelSelector={}, matchLabelKeys=["app"])
    assert verdicts(keyed, snapshot) == {"n-a": SKEW_FAIL, "n-b": FIT}


def test_every_constraint_must_hold_and_nodes_need_all_keys() -> None:
    rack = {
        "maxSkew": 1,
        "topologyKey": "rack",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    snapshot = make_snapshot(
        make_node("n1", labels={ZONE: "a", "rack": "r1"}, pods=web(1)),
        make_node("n2", labels={ZONE: "a", "rack": "r1"}),
        make_node("n3", labels={ZONE: "b", "rack": "r2"}),
        # Lacks rack: it fails, and its pods are not counted for zone b either.
        make_node("n4", labels={ZONE: "b"}, pods=web(3)),
    )
    pod = spread_pod()
    pod.topology_spread.append(rack)
    # n1/n2: zone a would reach 2 against zone b's 0.
    assert verdicts(pod, snapshot) == {"n1": SKEW_FAIL, "n2": SKEW_FAIL, "n3": FIT, "n4": LABEL_FAIL}
    # With a looser zone constraint, rack r1 still blocks n1 and n2.
    loose = spread_pod(maxSkew=5)
    loose.topology_spread.append(rack)
    assert verdicts(loose, snapshot) == {"n1": SKEW_FAIL, "n2": SKEW_FAIL, "n3": FIT, "n4": LABEL_FAIL}
    looser = spread_pod(maxSkew=5)
    looser.topology_spread.append({**rack, "maxSkew": 2})
    assert verdicts(looser, snapshot) == {"n1": FIT, "n2": FIT, "n3": FIT, "n4": LABEL_FAIL}


def test_adjust_reflects_removed_pods() -> None:
    snapshot = zones({"a": 3, "b": 1})
    predicate = TopologySpreadFilter()
    pod = spread_pod()
    state = predicate.prepare(pod, snapshot)
    assert predicate.check(pod, snapshot.nodes["n-a"], state) == SKEW_FAIL
    lighter = make_node("n-a", labels={ZONE: "a"}, pods=web(1))
    assert predicate.check(pod, lighter, predicate.adjust(state, pod, snapshot.nodes["n-a"], lighter)) == FIT


def test_adjust_counts_as_add_pod_and_remove_pod() -> None:
    """AddPod/RemovePod count the pods of the namespace the selector matches; terminating ones never counted."""
    app = {"app": "web"}
    live_a, leaving = make_pod("a", labels=app), make_pod("leaving", labels=app, deleting=True)
    snapshot = make_snapshot(
        make_node("n-a", labels={ZONE: "a"}, pods=[live_a, leaving]),
        make_node("n-b", labels={ZONE: "b"}, pods=[make_pod("b", labels=app)]),
    )
    predicate = TopologySpreadFilter()
    pod = spread_pod()
    state = predicate.prepare(pod, snapshot)
    n_a, n_b = snapshot.nodes["n-a"], snapshot.nodes["n-b"]
    assert predicate.check(pod, n_b, state) == FIT  # PreFilter: a 1, b 1 (the terminating pod left out)
    without_terminating = NodeInfo.build("n-a", n_a.node, [live_a], n_a.generation)
    assert predicate.check(pod, n_b, predicate.adjust(state, pod, n_a, without_terminating)) == FIT  # still a 1
    emptied = NodeInfo.build("n-a", n_a.node, [leaving], n_a.generation)
    assert predicate.check(pod, n_b, predicate.adjust(state, pod, n_a, emptied)) == SKEW_FAIL  # RemovePod: a 0, b 1
    # A node whose labels changed is recounted as PreFilter counts.
    moved = make_node("n-a", labels={ZONE: "b"}, pods=[live_a])
    assert predicate.check(pod, n_b, predicate.adjust(state, pod, n_a, moved)) == SKEW_FAIL
