"""Gang state follows the pods, through the real kube-scheduler, on one Redis and the same replicas.

A user's Redis and replicas see gangs come, finish, get cancelled and vanish for months; these
tests keep one stack for the whole module and never start from fresh state between steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from devstack import http_client
from devstack.kube import resources, wait_for
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack
from tests.e2e.test_gangs import LEGACY, POD_GROUP, UNICORE, bound, create_gang, legacy, watch_all_or_nothing

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2)


def podgroup_body(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


def gangs_doc(stack: Stack) -> list[dict[str, Any]]:
    resp = http_client.get(f"{stack.replicas[0].url}/v1/gangs", timeout=5)
    resp.raise_for_status()
    docs: list[dict[str, Any]] = resp.json()
    return docs


def test_gangs_cancelled_with_their_nodes_recreated_leave_nothing_that_holds_up_new_gangs(
    cluster: Cluster, stack: Stack
) -> None:
    """The issue's sequence: complete, unfit, short and small gangs; every pod deleted; the nodes
    deleted and created again under the same names; then two new gangs, each of which fits alone."""
    node_names = ["n0", "n1", "n2", "n3"]
    for name in node_names:
        cluster.node(name, cpu="4")
    cluster.wait_synced()
    g1 = create_gang(cluster, "g1", 4, 4, cpu="3")
    cluster.wait_bound(g1, timeout=60)
    g5 = create_gang(cluster, "g5", 5, 5, cpu="1")
    g3 = create_gang(cluster, "g3", 2, 2, cpu="250m")
    g4 = create_gang(cluster, "g4", 2, 3, cpu="250m")
    cluster.wait_bound(g3, timeout=60)
    cluster.stays_unbound(g5 + g4, 4)

    cluster.kube.delete_namespace_pods(cluster.namespace)
    wait_for(lambda: not cluster.kube.pods(cluster.namespace), 30, "every pod gone")
    for name in list(cluster.node_names):
        cluster.kube.delete_node(name)
    cluster.node_names.clear()
    for name in node_names:
        cluster.node(name, cpu="4")
    cluster.wait_synced()

    started = time.monotonic()
    ga = create_gang(cluster, "ga", 4, 4, cpu="3", labels={UNICORE[0]: "ga", UNICORE[1]: "4", "gang": "ga"})
    gb = create_gang(cluster, "gb", 4, 4, cpu="3", labels=legacy("gb", 4))

    def one_complete() -> str:
        done = [g for g, names in (("ga", ga), ("gb", gb)) if len(bound(cluster, names)) == len(names)]
        return done[0] if done else ""

    try:
        first = wait_for(one_complete, 20, "ga or gb complete")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\ngangs: {gangs_doc(stack)}\n{cluster.target.logs()}") from None
    first_seconds = time.monotonic() - started
    other = gb if first == "ga" else ga
    assert bound(cluster, other) == []
    cluster.kube.delete_pods(cluster.namespace, f"gang={first}")
    started = time.monotonic()
    cluster.wait_bound(other, timeout=20)
    print(f"first gang complete in {first_seconds:.1f}s, the other {time.monotonic() - started:.1f}s after")
    # The watch leader counts the gangs that vanished (g1, g3, g4 and g5 at least) as its reconciler
    # and journal reader come round: soon, not at once.
    wait_for(lambda: decisions(stack, "vanished") >= 4, 10, "four vanished gangs counted")


def decisions(stack: Stack, outcome: str) -> float:
    """``extender_gang_decisions_total{outcome}`` summed over the live replicas (the leader counts)."""
    return stack.metric("extender_gang_decisions_total", outcome=outcome)


def gang_doc(stack: Stack, namespace: str, gang: str) -> dict[str, Any]:
    """The gang's ``/v1/gangs`` document from the first live replica ({} when unknown)."""
    replica = next(r for r in stack.replicas if r.proc.poll() is None)
    resp = replica.get(f"/v1/gangs/{namespace}/{gang}")
    return resp.json() if resp.status_code == 200 else {}


def arrivals(cluster: Cluster, stack: Stack, gang: str, count: int, timeout: float = 30) -> list[dict[str, Any]]:
    """Wait until exactly ``count`` members of ``gang`` are held at bind."""

    def check() -> list[dict[str, Any]] | None:
        arrived: list[dict[str, Any]] = gang_doc(stack, cluster.namespace, gang).get("arrived") or []
        return arrived if len(arrived) == count else None

    try:
        return wait_for(check, timeout, f"{count} member(s) of {gang} held at bind")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{gang_doc(stack, cluster.namespace, gang)}\n{cluster.target.logs()}") from None


def released(cluster: Cluster, stack: Stack, gang: str, timeout: float = 10) -> dict[str, Any]:
    """Wait until ``gang`` holds nothing: no arrival, no assembling slot, no queue place."""

    def check() -> dict[str, Any] | None:
        doc = gang_doc(stack, cluster.namespace, gang)
        holds = doc.get("arrived") or doc.get("admitted") or doc.get("queuePosition")
        return None if holds else doc or {"gone": True}

    return wait_for(check, timeout, f"gang {gang} released")


# The member that makes its gang wait: it goes only to the late node, which takes nobody else (a
# sibling placed there would leave it no room).
LATE: dict[str, Any] = {
    "nodeSelector": {"role": "late"},
    "tolerations": [{"key": "role", "operator": "Equal", "value": "late", "effect": "NoSchedule"}],
}


def late_node(cluster: Cluster) -> str:
    return cluster.node(
        "late", cpu="4", labels={"role": "late"}, taints=[{"key": "role", "value": "late", "effect": "NoSchedule"}]
    )


def hold_gang(
    cluster: Cluster,
    stack: Stack,
    gang: str,
    size: int,
    labels: Callable[[int], dict[str, str]],
    cpu: str = "3",
) -> list[str]:
    """``size`` members of which the last can go nowhere until the late node exists (``late_node``),
    so the others end up held at bind; returns the names once they are held."""
    names = [f"{gang}-{i}" for i in range(size)]
    for i, name in enumerate(names):
        spec = LATE if i == size - 1 else {}
        cluster.pod(name, requests=resources(cpu=cpu), labels=labels(i), **spec)
    arrivals(cluster, stack, gang, size - 1)
    return names


def hold_podgroup_gang(cluster: Cluster, stack: Stack) -> list[str]:
    """Three nodes of 4 CPU and PodGroup ``t`` (minMember 3) whose first two members are held at bind."""
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    cluster.kube.create(podgroup_path(cluster), podgroup_body("t", 3))
    return hold_gang(cluster, stack, "t", 3, grouped("t"))


def small_gang(cluster: Cluster, gang: str, size: int = 3) -> list[str]:
    """A gang that fits anywhere, created behind the gang assembling now."""
    names = create_gang(cluster, gang, size, size, cpu="250m")
    cluster.stays_unbound(names, 1)
    return names


def podgroup_path(cluster: Cluster, name: str = "") -> str:
    base = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups"
    return f"{base}/{name}" if name else base


def grouped(group: str) -> Callable[[int], dict[str, str]]:
    return lambda _i: {POD_GROUP: group, "gang": group}


def legacy_labels(gang: str, minimum: int) -> Callable[[int], dict[str, str]]:
    return lambda _i: legacy(gang, minimum)


@pytest.mark.parametrize("deleted", ["held", "pending"])
def test_a_gang_that_loses_a_member_while_assembling_lets_the_next_gang_go(
    cluster: Cluster, stack: Stack, deleted: str
) -> None:
    """A member deleted while held at bind, or the gang shrunk below its minimum by deleting a pending
    member: the held members are released and the gang queued behind completes at once."""
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    a = hold_gang(cluster, stack, "a", 3, legacy_labels("a", 3))
    b = small_gang(cluster, "b")
    victim = a[0] if deleted == "held" else a[-1]
    started = time.monotonic()
    cluster.kube.delete_pod(cluster.namespace, victim)
    cluster.wait_bound(b, timeout=15)
    print(f"gang b complete {time.monotonic() - started:.1f}s after a member of a was deleted")
    released(cluster, stack, "a")
    assert bound(cluster, a) == []
    # The member comes back (its job recreates it) and the late node appears: a completes, whole.
    cluster.pod(
        victim,
        requests=resources(cpu="3"),
        labels=legacy("a", 3),
        **(LATE if victim == a[-1] else {}),
    )
    late_node(cluster)
    watch_all_or_nothing(cluster, {"a": a}, 2)
    cluster.wait_bound(a, timeout=60)


def test_a_lowered_podgroup_minimum_binds_the_members_already_held(cluster: Cluster, stack: Stack) -> None:
    t = hold_podgroup_gang(cluster, stack)
    assert bound(cluster, t) == []
    cluster.kube.patch(podgroup_path(cluster, "t"), {"spec": {"minMember": 2}})
    cluster.wait_bound(t[:2], timeout=10)
    late_node(cluster)
    cluster.wait_bound(t, timeout=60)


def test_a_raised_podgroup_minimum_releases_the_held_members_until_it_is_lowered_again(
    cluster: Cluster, stack: Stack
) -> None:
    t = hold_podgroup_gang(cluster, stack)
    cluster.kube.patch(podgroup_path(cluster, "t"), {"spec": {"minMember": 4}})
    released(cluster, stack, "t")
    # The watch leader reports it on the PodGroup, with the reason.
    wait_for(lambda: "GangReleased" in cluster.extender_events().get(("PodGroup", "t"), set()), 15, "the Event")
    # t can complete no more: b need not wait behind it (how soon it goes depends on when kube-scheduler
    # retries t's members, which differs between releases).
    b = create_gang(cluster, "b", 3, 3, cpu="250m")
    cluster.wait_bound(b, timeout=15)
    assert bound(cluster, t) == []
    # Lowered again: the members turned away meanwhile are requeued and assemble again.
    cluster.kube.patch(podgroup_path(cluster, "t"), {"spec": {"minMember": 3}})
    arrivals(cluster, stack, "t", 2)
    late_node(cluster)
    watch_all_or_nothing(cluster, {"t": t}, 2)
    cluster.wait_bound(t, timeout=60)


def test_a_deleted_podgroup_releases_its_gang_and_a_new_one_lets_it_complete(cluster: Cluster, stack: Stack) -> None:
    t = hold_podgroup_gang(cluster, stack)
    b = small_gang(cluster, "b")
    cluster.kube.delete(podgroup_path(cluster, "t"))
    cluster.wait_bound(b, timeout=15)
    released(cluster, stack, "t")
    assert bound(cluster, t) == []
    cluster.kube.create(podgroup_path(cluster), podgroup_body("t", 3))
    arrivals(cluster, stack, "t", 2)
    late_node(cluster)
    cluster.wait_bound(t, timeout=60)


def test_a_member_relabelled_out_of_its_gang_while_held_binds_alone_and_the_gang_waits(
    cluster: Cluster, stack: Stack
) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    a = hold_gang(cluster, stack, "a", 3, legacy_labels("a", 3))
    moved = a[1]
    cluster.kube.patch(
        f"/api/v1/namespaces/{cluster.namespace}/pods/{moved}",
        {"metadata": {"labels": {LEGACY[0]: None, LEGACY[1]: None, "gang": None}}},
    )
    cluster.wait_bound([moved], timeout=30)  # now a plain pod
    released(cluster, stack, "a")  # two live members left of the three required
    rest = [n for n in a if n != moved]
    assert bound(cluster, rest) == []
    cluster.pod("a-3", requests=resources(cpu="3"), labels=legacy("a", 3))
    late_node(cluster)
    cluster.wait_bound([*rest, "a-3"], timeout=60)


def test_a_node_deleted_under_a_held_member_and_created_again(cluster: Cluster, stack: Stack) -> None:
    nodes = cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    a = hold_gang(cluster, stack, "a", 3, legacy_labels("a", 3))
    placed = {arrival["node"]: arrival["pod"] for arrival in arrivals(cluster, stack, "a", 2)}
    assert set(placed) == set(nodes)
    gone = nodes[0]
    cluster.kube.delete_node(gone)
    # Its reservation is void: one member is held on the other node, none on the deleted one.
    left = wait_for(
        lambda: [x["node"] for x in gang_doc(stack, cluster.namespace, "a").get("arrived") or []] == [nodes[1]],
        10,
        "the member held on the deleted node released",
    )
    assert left and bound(cluster, a) == []
    cluster.kube.create_node(gone, cpu="4")
    arrivals(cluster, stack, "a", 2)
    late_node(cluster)
    watch_all_or_nothing(cluster, {"a": a}, 2)
    final = cluster.wait_bound(a, timeout=60)
    assert sorted(final[n] for n in a[:2]) == sorted(nodes)


def test_a_replica_restarted_mid_assembly_binds_nothing_partial(cluster: Cluster, stack: Stack) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    a = hold_gang(cluster, stack, "a", 3, legacy_labels("a", 3))
    holders = {arrival["replica"] for arrival in arrivals(cluster, stack, "a", 2)}
    index = next(i for i, r in enumerate(stack.replicas) if r.name in holders)
    stack.restart_replica(index)
    watch_all_or_nothing(cluster, {"a": a}, 3)
    arrivals(cluster, stack, "a", 2)  # kube-scheduler's retries are held again
    late_node(cluster)
    cluster.wait_bound(a, timeout=60)


def test_kube_scheduler_restarted_mid_assembly_withdraws_the_cut_off_calls(cluster: Cluster, stack: Stack) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    a = hold_gang(cluster, stack, "a", 3, legacy_labels("a", 3))
    assert stack.scheduler is not None
    stack.scheduler.restart()
    watch_all_or_nothing(cluster, {"a": a}, 2)
    arrivals(cluster, stack, "a", 2)  # the new kube-scheduler places them again
    late_node(cluster)
    cluster.wait_bound(a, timeout=60)
