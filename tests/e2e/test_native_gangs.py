"""Native pod groups (``scheduling.k8s.io`` PodGroup, ``spec.schedulingGroup``) with kube-scheduler's
own gang plug-in on: the extender never holds such a pod a second time, whatever its labels, and such a
gang is never left waiting on the extender; with the plug-in off in kube-scheduler, nobody holds it.

A control plane of its own, with the ``GenericWorkload`` feature gate on in kube-apiserver and
kube-scheduler and ``scheduling.k8s.io/v1beta1`` served (1.37: the gate is beta and off by default).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from devstack import http_client
from devstack.controlplane import ControlPlane, find_binaries
from devstack.kube import Kube, resources, wait_for
from devstack.releases import Release
from devstack.stack import Stack
from tests.e2e.conftest import GANG_ENV, Cluster
from tests.e2e.test_gangs import legacy

pytestmark = pytest.mark.e2e

PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"


@pytest.fixture(scope="module")
def gated(
    kube_release: Release, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, Stack]]:
    if kube_release.minor < 37:
        pytest.skip(f"native pod groups are served as scheduling.k8s.io/v1beta1 from 1.37, not {kube_release.version}")
    binaries, _ = find_binaries(kube_release)
    workdir = tmp_path_factory.mktemp("native-gangs")
    plane = ControlPlane(
        workdir / "plane",
        binaries,
        feature_gates="GenericWorkload=true",
        runtime_config="scheduling.k8s.io/v1beta1=true",
    )
    stack: Stack | None = None
    try:
        plane.start()
        kube = Kube(plane.client())
        stack = Stack(plane, redis_url, workdir, env=GANG_ENV)
        yield kube, stack
    finally:
        if stack is not None:
            stack.stop()
        plane.stop()


@pytest.fixture
def cluster(gated: tuple[Kube, Stack]) -> Iterator[Cluster]:
    kube, stack = gated
    namespace = f"native-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    c = Cluster(kube, stack, namespace)
    yield c
    c.cleanup()


def podgroup(cluster: Cluster, name: str, min_count: int) -> None:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    cluster.kube.create(PODGROUPS.format(namespace=cluster.namespace), body)


def members(cluster: Cluster, group: str, count: int, cpu: str, labels: dict[str, str] | None = None) -> list[str]:
    names = [f"{group}-{i}" for i in range(count)]
    for name in names:
        cluster.pod(name, requests=resources(cpu=cpu), labels=labels or {}, schedulingGroup={"podGroupName": group})
    return names


@pytest.fixture
def ungated_cluster(
    gated: tuple[Kube, Stack], redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The API server keeps the field, but this stack's kube-scheduler runs without the gate."""
    kube, gated_stack = gated
    stack = Stack(
        gated_stack.plane, redis_url, tmp_path_factory.mktemp("ungated"), env=GANG_ENV, scheduler_feature_gates=""
    )
    namespace = f"ungated-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    c = Cluster(kube, stack, namespace)
    try:
        yield c
    finally:
        c.cleanup()
        stack.stop()


def gangs_known(cluster: Cluster) -> list[str]:
    """The gangs the extender's replicas know of in this namespace."""
    known: list[str] = []
    for url in cluster.target.replica_urls:
        resp = http_client.get(f"{url}/v1/gangs", timeout=5)
        resp.raise_for_status()
        known += [doc["name"] for doc in resp.json() if doc["namespace"] == cluster.namespace]
    return known


def test_a_native_gang_binds_whole_through_the_extender(cluster: Cluster) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    podgroup(cluster, "train", 3)
    filters = sum(cluster.requests("filter").values())
    names = members(cluster, "train", 3, cpu="3")
    placed = cluster.wait_bound(names, timeout=60)
    assert len({placed[n] for n in names}) == 3, "each member needs 3 of a node's 4 CPUs"
    assert sum(cluster.requests("filter").values()) > filters, "kube-scheduler called the extender"
    assert gangs_known(cluster) == []


def test_our_gang_labels_on_a_native_gang_do_not_hold_it_a_second_time(cluster: Cluster) -> None:
    # Our labels ask for 4 members; only the native group's 3 exist. Held by both, it would wait for ever.
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    podgroup(cluster, "both", 3)
    names = members(cluster, "both", 3, cpu="3", labels=legacy("both", 4))
    cluster.wait_bound(names, timeout=60)
    assert gangs_known(cluster) == []


def test_a_native_gang_that_cannot_fit_waits_in_kube_scheduler_and_binds_once_it_fits(cluster: Cluster) -> None:
    cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    podgroup(cluster, "big", 3)
    names = members(cluster, "big", 3, cpu="3")
    cluster.stays_unbound(names, 5)  # kube-scheduler's plug-in holds the group: nothing partial
    assert gangs_known(cluster) == []
    cluster.node("late", cpu="4")
    cluster.wait_bound(names, timeout=60)


def test_with_the_gate_off_in_kube_scheduler_members_go_one_by_one_and_none_is_held(ungated_cluster: Cluster) -> None:
    # Nobody holds a native group then: kube-scheduler ignores the field, and the extender leaves such
    # pods to it whatever our labels say (they ask for 4 here). Two fit, the third waits for room.
    cluster = ungated_cluster
    cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    podgroup(cluster, "solo", 3)
    names = members(cluster, "solo", 3, cpu="3", labels=legacy("solo", 4))
    wait_for(lambda: len(cluster.bound(names)) == 2, 60, "two members bound one by one")
    cluster.stays_unbound([n for n in names if n not in cluster.bound(names)], 3)
    assert gangs_known(cluster) == []
