"""A pod kube-scheduler schedules again is judged without its own reservation, as kube-scheduler judges it.

A reservation outlives a bind whose replica died mid-call, or whose Binding got no answer; counted
against the pod itself it would keep the pod off the node it holds, and off a full cluster entirely.
"""

from __future__ import annotations

from dataclasses import replace

from extenders import engine
from extenders.equivalence import EquivalenceCache
from extenders.model import PodInfo
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, make_snapshot

ONE_CPU = {"cpu": "1", "memory": "4Gi", "pods": "10"}


def full_cluster(own: PodInfo) -> Snapshot:
    """Two one-CPU nodes: ``own`` holds the first, another pod the second."""
    return make_snapshot(
        make_node("held", allocatable=ONE_CPU, pods=[own]),
        make_node("taken", allocatable=ONE_CPU, pods=[make_pod("other", requests={"cpu": "1"}, node_name="taken")]),
    )


def test_its_own_reservation_does_not_keep_a_pod_off_the_node_it_holds() -> None:
    pod = make_pod("retried", requests={"cpu": "1"})
    reserved = replace(pod, node_name="held", assumed=True)
    snapshot = full_cluster(reserved)

    view = engine.without_own_reservation(snapshot, pod, ["held", "taken"])
    result = engine.filter_nodes(default_policy(), pod, view, ["held", "taken"])
    assert result.passing == ["held"] and set(result.failed) == {"taken"}
    # The snapshot itself is untouched: every other pod still counts the reservation.
    assert pod.uid in snapshot.nodes["held"].pods
    stranger = make_pod("stranger", requests={"cpu": "1"})
    assert engine.filter_nodes(default_policy(), stranger, snapshot, ["held"]).passing == []


def test_a_bound_copy_of_the_pod_still_counts() -> None:
    """Only a reservation is the pod's own business; a binding the watch has seen is the cluster's."""
    pod = make_pod("retried", requests={"cpu": "1"})
    bound = replace(pod, node_name="held", assumed=False)
    snapshot = full_cluster(bound)
    assert engine.without_own_reservation(snapshot, pod, ["held", "taken"]) is snapshot


def test_a_pod_without_a_reservation_gets_the_same_snapshot() -> None:
    snapshot = full_cluster(replace(make_pod("someone", requests={"cpu": "1"}), node_name="held", assumed=True))
    pod = make_pod("fresh", requests={"cpu": "1"})
    assert engine.without_own_reservation(snapshot, pod, ["held", "taken"]) is snapshot


def test_the_equivalence_cache_does_not_carry_the_view_over_to_other_pods() -> None:
    """A class's cached verdict for the held node, made without the reservation, must not let a
    sibling of that class (which has to count it) onto the node."""
    policy, cache = default_policy(), EquivalenceCache()
    pod = make_pod("retried", labels={"app": "a"}, requests={"cpu": "1"})
    sibling = make_pod("sibling", labels={"app": "a"}, requests={"cpu": "1"})
    snapshot = full_cluster(replace(pod, node_name="held", assumed=True))
    for _ in range(2):  # the class is admitted on its second sighting, then its verdicts are kept
        view = engine.without_own_reservation(snapshot, pod, ["held"])
        assert engine.filter_nodes(policy, pod, view, ["held"], cache.memo(pod)).passing == ["held"]
    assert engine.filter_nodes(policy, sibling, snapshot, ["held"], cache.memo(sibling)).passing == []
