"""MatchInterPodAffinity: required affinity, anti-affinity, symmetry, the self-affine first pod."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.labels import NAMESPACE_NAME_LABEL
from extenders.model import NamespaceInfo, PodInfo
from extenders.plugins.framework import SKIP, Verdict
from extenders.plugins.inter_pod_affinity.filtering import InterPodAffinityFilter
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, make_snapshot, run_predicate

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
    # And from SKIP: kube-scheduler runs no AddPod of a plug-in that skipped the pod, so an added
    # guard (a nominated pod) is not counted.
    plain = make_pod("plain", labels={"app": "web"})
    skipped = predicate.prepare(plain, cluster(("n1", "z1", []), ("n2", "z2", [])))
    assert skipped is SKIP
    guarded = make_node("n1", labels={ZONE: "z1"}, pods=[with_affinity("guard", anti=[term("web")])])
    assert predicate.adjust(skipped, plain, None, guarded) is SKIP


# ---------------------------------------------------------------- namespaceSelector
NAMESPACES = {
    "default": {},
    "team-a": {"team": "a"},
    "team-b": {"team": "b"},
    "other": {},
}


def with_namespaces(snapshot: Snapshot, labels: dict[str, dict[str, str]] = NAMESPACES) -> Snapshot:
    """``snapshot`` holding Namespaces labelled as ``labels`` says (plus the name label every namespace has)."""
    snapshot.objects = {
        "namespaces": {
            name: NamespaceInfo(name, {NAMESPACE_NAME_LABEL: name, **extra}) for name, extra in labels.items()
        }
    }
    return snapshot


def _db_in_three_namespaces() -> Snapshot:
    return with_namespaces(
        cluster(
            ("n1", "z1", [make_pod("db", "team-a", labels={"app": "db"})]),
            ("n2", "z2", [make_pod("db", "team-b", labels={"app": "db"})]),
            ("n3", "z3", [make_pod("db", "other", labels={"app": "db"})]),
            ("n4", "z4", []),
        )
    )


@pytest.mark.parametrize(
    ("extra", "fit"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"n1"}, id="labels-match"),
        pytest.param(
            {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}},
            {"n1", "n2"},
            id="expression",
        ),
        pytest.param({"namespaceSelector": {}}, {"n1", "n2", "n3"}, id="empty-selector-all-namespaces"),
        pytest.param(
            {"namespaces": ["other"], "namespaceSelector": {"matchLabels": {"team": "b"}}},
            {"n2", "n3"},
            id="list-united-with-selector",
        ),
        pytest.param(
            {"namespaces": ["team-a"], "namespaceSelector": {"matchLabels": {"team": "c"}}},
            {"n1"},
            id="list-with-selector-selecting-none",
        ),
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "c"}}}, set(), id="selects-no-namespace"),
        pytest.param({}, set(), id="neither-means-own-namespace"),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "other"}}}, {"n3"}, id="by-name-label"
        ),
    ],
)
def test_affinity_namespace_selector_matches_namespace_labels(extra: dict[str, Any], fit: set[str]) -> None:
    pod = with_affinity(affinity=[term("db", **extra)])
    expected = {n: FIT if n in fit else AFFINITY_FAIL for n in ("n1", "n2", "n3", "n4")}
    assert verdicts(pod, _db_in_three_namespaces()) == expected


@pytest.mark.parametrize(
    ("extra", "blocked"),
    [
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"n1"}, id="labels-match"),
        pytest.param({"namespaceSelector": {}}, {"n1", "n2", "n3"}, id="empty-selector-all-namespaces"),
        pytest.param(
            {"namespaces": ["other"], "namespaceSelector": {"matchLabels": {"team": "b"}}},
            {"n2", "n3"},
            id="list-united-with-selector",
        ),
    ],
)
def test_anti_affinity_namespace_selector_matches_namespace_labels(extra: dict[str, Any], blocked: set[str]) -> None:
    pod = with_affinity(anti=[term("db", **extra)])
    expected = {n: ANTI_FAIL if n in blocked else FIT for n in ("n1", "n2", "n3", "n4")}
    assert verdicts(pod, _db_in_three_namespaces()) == expected


@pytest.mark.parametrize(
    ("selector", "incoming_namespace", "blocked"),
    [
        pytest.param({"matchLabels": {"team": "a"}}, "team-a", True, id="incoming-namespace-labels-match"),
        pytest.param({"matchLabels": {"team": "a"}}, "team-b", False, id="incoming-namespace-labels-differ"),
        pytest.param({}, "team-b", True, id="empty-selector-every-namespace"),
        pytest.param({"matchLabels": {"team": "a"}}, "guards", False, id="own-namespace-not-selected"),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, "default", True, id="does-not-exist"
        ),
        # A namespace the watched table does not hold has no labels, as kube-scheduler takes it.
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, "ghost", True, id="unknown-no-labels"
        ),
        pytest.param({"matchLabels": {NAMESPACE_NAME_LABEL: "ghost"}}, "ghost", False, id="unknown-has-no-name"),
    ],
)
def test_existing_pods_anti_affinity_namespace_selector_reads_the_incoming_namespace(
    selector: dict[str, Any], incoming_namespace: str, blocked: bool
) -> None:
    guard = with_affinity("guard", "guards", labels={"app": "guard"}, anti=[term("web", namespaceSelector=selector)])
    snapshot = with_namespaces(
        cluster(("n1", "z1", [guard]), ("n2", "z1", []), ("n3", "z2", [])), {**NAMESPACES, "guards": {}}
    )
    web = make_pod("incoming", incoming_namespace, labels={"app": "web"})
    want = EXISTING_FAIL if blocked else FIT
    assert verdicts(web, snapshot) == {"n1": want, "n2": want, "n3": FIT}


def test_first_pod_of_a_self_affine_group_counts_its_namespace_through_the_selector() -> None:
    snapshot = with_namespaces(cluster(("n1", "z1", []), ("n2", "z2", [])))
    selector = {"matchLabels": {"team": "a"}}
    mine = with_affinity("p", "team-a", labels={"app": "web"}, affinity=[term("web", namespaceSelector=selector)])
    assert verdicts(mine, snapshot) == {"n1": FIT, "n2": FIT}
    # Its own namespace is not among those the term selects: it does not match its own term.
    elsewhere = with_affinity("p", "team-b", labels={"app": "web"}, affinity=[term("web", namespaceSelector=selector)])
    assert verdicts(elsewhere, snapshot) == {"n1": AFFINITY_FAIL, "n2": AFFINITY_FAIL}


def test_without_namespaces_in_the_snapshot_only_the_name_label_is_known() -> None:
    snapshot = cluster(("n1", "z1", [make_pod("db", "team-a", labels={"app": "db"})]), ("n2", "z2", []))
    by_label = with_affinity(affinity=[term("db", namespaceSelector={"matchLabels": {"team": "a"}})])
    assert verdicts(by_label, snapshot)["n1"] == AFFINITY_FAIL
    by_name = with_affinity(affinity=[term("db", namespaceSelector={"matchLabels": {NAMESPACE_NAME_LABEL: "team-a"}})])
    assert verdicts(by_name, snapshot)["n1"] == FIT


def test_a_namespace_relabelled_changes_the_verdict_on_the_next_snapshot() -> None:
    snapshot = _db_in_three_namespaces()
    pod = with_affinity(affinity=[term("db", namespaceSelector={"matchLabels": {"team": "a"}})])
    assert verdicts(pod, snapshot)["n2"] == AFFINITY_FAIL
    relabelled = Snapshot(nodes=snapshot.nodes)
    with_namespaces(relabelled, {**NAMESPACES, "team-b": {"team": "a"}})
    assert verdicts(pod, relabelled)["n2"] == FIT
