"""MatchInterPodAffinity: required affinity, anti-affinity, symmetry, the self-affine first pod."""

from __future__ import annotations

from typing import Any

from extenders.model import PodInfo
from extenders.plugins.framework import SKIP, Verdict
from extenders.plugins.inter_pod_affinity.filtering import InterPodAffinityFilter
from extenders.snapshot import Snapshot
from tests.gen_cluster import make_node, make_pod, make_snapshot, run_predicate

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
AFFINITY_FAIL = Verdict(False, "node(s) didn't match pod affinity rules", True)
ANTI_FAIL = Verdict(False, "node(s) didn't match pod anti-affinity rules")
EXISTING_FAIL = Verdict(False, "node(s) didn't satisfy existing pods anti-affinity rules")
FIT = Verdict(True)


def term(app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def with_affinity(
    name: str = "p",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    affinity: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
) -> PodInfo:
    spec: dict[str, Any] = {"affinity": {}}
    if affinity:
        spec["affinity"]["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        spec["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return make_pod(name, namespace, labels=labels, spec=spec)


def cluster(*placements: tuple[str, str, list[PodInfo]]) -> Snapshot:
    """(node name, zone or "", pods) triples."""
    return make_snapshot(
        *(make_node(name, labels={ZONE: zone} if zone else {}, pods=pods) for name, zone, pods in placements)
    )


def verdicts(pod: PodInfo, snapshot: Snapshot) -> dict[str, Verdict]:
    return {name: run_predicate("MatchInterPodAffinity", pod, node, snapshot) for name, node in snapshot.nodes.items()}


def test_no_terms_anywhere_is_skipped() -> None:
    snapshot = cluster(("n1", "z1", [make_pod("a", labels={"app": "db"})]))
    assert InterPodAffinityFilter().prepare(make_pod(), snapshot) is SKIP


def test_affinity_follows_the_topology_domain() -> None:
    db = make_pod("db", labels={"app": "db"})
    snapshot = cluster(("n1", "z1", [db]), ("n2", "z1", []), ("n3", "z2", []), ("n4", "", []))
    pod = with_affinity(affinity=[term("db")])
    assert verdicts(pod, snapshot) == {"n1": FIT, "n2": FIT, "n3": AFFINITY_FAIL, "n4": AFFINITY_FAIL}


def test_affinity_respects_namespaces() -> None:
    db = make_pod("db", "other", labels={"app": "db"})
    snapshot = cluster(("n1", "z1", [db]), ("n2", "z2", [make_pod("x", labels={"app": "x"})]))
    own_namespace = with_affinity(affinity=[term("db")])
    assert verdicts(own_namespace, snapshot)["n1"] == AFFINITY_FAIL
    listed = with_affinity(affinity=[term("db", namespaces=["other"])])
    assert verdicts(listed, snapshot) == {"n1": FIT, "n2": AFFINITY_FAIL}
    all_namespaces = with_affinity(affinity=[term("db", namespaceSelector={})])
    assert verdicts(all_namespaces, snapshot)["n1"] == FIT
    by_name = with_affinity(
        affinity=[term("db", namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "other"}})]
    )
    assert verdicts(by_name, snapshot)["n1"] == FIT


def test_affinity_counts_only_pods_matching_all_terms() -> None:
    db = make_pod("db", labels={"app": "db"})
    cache = make_pod("cache", labels={"app": "cache"})
    snapshot = cluster(("n1", "z1", [db, cache]), ("n2", "z2", []))
    pod = with_affinity(affinity=[term("db"), term("cache")])
    # No single pod matches both terms, and the pod does not match them itself.
    assert verdicts(pod, snapshot) == {"n1": AFFINITY_FAIL, "n2": AFFINITY_FAIL}


def test_first_pod_of_a_self_affine_group_is_allowed() -> None:
    snapshot = cluster(("n1", "z1", [make_pod("x", labels={"app": "x"})]), ("n2", "z2", []), ("n3", "", []))
    pod = with_affinity(labels={"app": "web"}, affinity=[term("web")])
    # Allowed wherever the topology key exists.
    assert verdicts(pod, snapshot) == {"n1": FIT, "n2": FIT, "n3": AFFINITY_FAIL}
    # Not when the pod does not match its own terms.
    stranger = with_affinity(labels={"app": "other"}, affinity=[term("web")])
    assert verdicts(stranger, snapshot)["n1"] == AFFINITY_FAIL
    # Nor once a matching pod exists somewhere: then it must join that pod's domain.
    snapshot2 = cluster(("n1", "z1", [make_pod("w", labels={"app": "web"})]), ("n2", "z2", []))
    assert verdicts(pod, snapshot2) == {"n1": FIT, "n2": AFFINITY_FAIL}


def test_anti_affinity_of_the_incoming_pod() -> None:
    web = make_pod("web", labels={"app": "web"})
    snapshot = cluster(("n1", "z1", [web]), ("n2", "z1", []), ("n3", "z2", []), ("n4", "", []))
    pod = with_affinity(anti=[term("web")])
    assert verdicts(pod, snapshot) == {"n1": ANTI_FAIL, "n2": ANTI_FAIL, "n3": FIT, "n4": FIT}
    per_host = with_affinity(anti=[term("web", HOST)])
    assert verdicts(per_host, snapshot) == {"n1": ANTI_FAIL, "n2": FIT, "n3": FIT, "n4": FIT}


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    guard = with_affinity("guard", labels={"app": "guard"}, anti=[term("web")])
    snapshot = cluster(("n1", "z1", [guard]), ("n2", "z1", []), ("n3", "z2", []), ("n4", "", []))
    web = make_pod("incoming", labels={"app": "web"})
    assert verdicts(web, snapshot) == {"n1": EXISTING_FAIL, "n2": EXISTING_FAIL, "n3": FIT, "n4": FIT}
    # The guard's term is relative to the guard's namespace.
    web_elsewhere = make_pod("incoming", "other", labels={"app": "web"})
    assert set(verdicts(web_elsewhere, snapshot).values()) == {FIT}
    # A pod the guard's selector does not pick is unaffected.
    assert set(verdicts(make_pod("db", labels={"app": "db"}), snapshot).values()) == {FIT}


def test_check_order_affinity_before_anti_affinity() -> None:
    db = make_pod("db", labels={"app": "db"})
    snapshot = cluster(("n1", "z1", [db]), ("n2", "z2", []))
    pod = with_affinity(affinity=[term("db")], anti=[term("db")])
    assert verdicts(pod, snapshot) == {"n1": ANTI_FAIL, "n2": AFFINITY_FAIL}


def test_adjust_after_removing_the_blocking_pod() -> None:
    web = make_pod("web", labels={"app": "web"})
    snapshot = cluster(("n1", "z1", [web]), ("n2", "z2", []))
    pod = with_affinity(anti=[term("web")])
    predicate = InterPodAffinityFilter()
    state = predicate.prepare(pod, snapshot)
    emptied = make_node("n1", labels={ZONE: "z1"}, pods=[])
    adjusted = predicate.adjust(state, pod, snapshot.nodes["n1"], emptied)
    assert predicate.check(pod, emptied, adjusted) == FIT
    assert predicate.check(pod, snapshot.nodes["n1"], state) == ANTI_FAIL  # the original is untouched
    # And from SKIP: adding a guard creates a constraint.
    plain = make_pod("plain", labels={"app": "web"})
    skipped = predicate.prepare(plain, cluster(("n1", "z1", []), ("n2", "z2", [])))
    assert skipped is SKIP
    guarded = make_node("n1", labels={ZONE: "z1"}, pods=[with_affinity("guard", anti=[term("web")])])
    assert predicate.check(plain, guarded, predicate.adjust(skipped, plain, None, guarded)) == EXISTING_FAIL
