"""Gangs through the real kube-scheduler: where members end up, read back from the API server.

kube-scheduler drives us as it really does: one pod per cycle, bind asynchronously after it
assumes the pod, rejected pods parked as unschedulable and retried on events with backoff.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest

from devstack.kube import resources, wait_for
from tests.e2e.conftest import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

LEGACY = ("pod-group.scheduling.sigs.k8s.io/name", "pod-group.scheduling.sigs.k8s.io/min-available")
UNICORE = ("gang.unicore.mcyou.cn/name", "gang.unicore.mcyou.cn/available-count")
POD_GROUP = "scheduling.x-k8s.io/pod-group"
POD_GROUP_MIN = "scheduling.x-k8s.io/min-available"


def legacy(gang: str, minimum: int) -> dict[str, str]:
    return {LEGACY[0]: gang, LEGACY[1]: str(minimum), "gang": gang}


def create_gang(
    cluster: Cluster,
    gang: str,
    size: int,
    minimum: int,
    cpu: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    start: int = 0,
) -> list[str]:
    names = [f"{gang}-{i}" for i in range(start, start + size)]
    for name in names:
        cluster.pod(
            name,
            requests=resources(cpu=cpu),
            labels=labels if labels is not None else legacy(gang, minimum),
            annotations=annotations,
        )
    return names


def create_podgroup(cluster: Cluster, name: str, min_member: int) -> None:
    cluster.kube.create(
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member},
        },
    )


def bound(cluster: Cluster, names: list[str]) -> list[str]:
    placed = cluster.placement()
    return [n for n in names if placed.get(n)]


# A permitted gang's Bindings are separate API calls, a few milliseconds apart: a gang may be seen
# partly bound while they are made, never for longer than this.
BINDING_SECONDS = 1.0


def watch_all_or_nothing(cluster: Cluster, gangs: dict[str, list[str]], seconds: float) -> None:
    """For ``seconds``, every gang is either wholly bound or not bound at all (but while its
    Bindings are being made)."""
    deadline = time.monotonic() + seconds
    partly: dict[str, float] = {}  # gang -> when it was first seen partly bound
    while time.monotonic() < deadline or partly:
        placed = cluster.placement()
        now = time.monotonic()
        for gang, names in gangs.items():
            count = sum(1 for n in names if placed.get(n))
            if count in (0, len(names)):
                partly.pop(gang, None)
                continue
            since = partly.setdefault(gang, now)
            assert now - since <= BINDING_SECONDS, f"gang {gang} partly bound for {now - since:.1f} s: {placed}"
        time.sleep(0.1)


def test_a_gang_that_fits_exactly_binds_every_member_one_per_node(cluster: Cluster) -> None:
    nodes = cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    names = create_gang(cluster, "exact", 4, 4, cpu="3")
    placed = cluster.wait_bound(names, timeout=60)
    assert sorted(placed[n] for n in names) == sorted(nodes)


def test_a_gang_that_only_partly_fits_binds_nothing_and_does_not_block_another(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    # Five members of 3 CPUs: 15 of the 16 CPUs, but only four members fit, one per node.
    big = create_gang(cluster, "big", 5, 5, cpu="3")
    small = create_gang(cluster, "small", 3, 3, cpu="1")
    cluster.wait_bound(small, timeout=60)
    watch_all_or_nothing(cluster, {"big": big, "small": small}, 8)
    assert bound(cluster, big) == []


def test_a_gang_short_of_its_minimum_waits_and_completes_once_its_pods_exist(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    first = create_gang(cluster, "late", 2, 4, cpu="1")
    watch_all_or_nothing(cluster, {"late": first}, 6)
    assert bound(cluster, first) == []
    rest = create_gang(cluster, "late", 2, 4, cpu="1", start=2)
    cluster.wait_bound(first + rest, timeout=60)


def test_two_gangs_that_fit_only_one_at_a_time_complete_one_after_the_other(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    a = create_gang(cluster, "a", 4, 4, cpu="3")
    b = create_gang(cluster, "b", 4, 4, cpu="3")

    def one_complete() -> str:
        done = [g for g, names in (("a", a), ("b", b)) if len(bound(cluster, names)) == len(names)]
        return done[0] if done else ""

    winner = wait_for(one_complete, 60, "one gang bound")
    watch_all_or_nothing(cluster, {"a": a, "b": b}, 6)
    loser, loser_names = ("b", b) if winner == "a" else ("a", a)
    assert bound(cluster, loser_names) == [], f"{loser} bound while {winner} holds the capacity"
    # The winner finishes: its pods go away, and the other gang gets the capacity.
    cluster.kube.delete_pods(cluster.namespace, f"gang={winner}")
    cluster.wait_bound(loser_names, timeout=90)


def test_members_created_seconds_apart_complete_the_gang(cluster: Cluster) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    names: list[str] = []
    for i in range(4):
        names += create_gang(cluster, "trickle", 1, 4, cpu="1", start=i)
        if i < 3:
            time.sleep(2)
            assert bound(cluster, names) == []
    cluster.wait_bound(names, timeout=60)


def test_twenty_small_gangs_created_at_once_all_complete(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="8")
    cluster.wait_synced()
    gangs = {f"s{g:02d}": create_gang(cluster, f"s{g:02d}", 3, 3, cpu="250m") for g in range(20)}
    everyone = [n for names in gangs.values() for n in names]
    cluster.wait_bound(everyone, timeout=180)


def test_each_label_scheme_and_a_podgroup_make_a_gang(cluster: Cluster) -> None:
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    create_podgroup(cluster, "pg", 3)
    gangs = {
        "legacy": create_gang(cluster, "legacy", 3, 3, cpu="500m"),
        "unicore": create_gang(cluster, "unicore", 3, 3, cpu="500m", labels={UNICORE[0]: "u", UNICORE[1]: "3"}),
        "annotated": create_gang(
            cluster, "annotated", 3, 3, cpu="500m", labels={POD_GROUP: "ann"}, annotations={POD_GROUP_MIN: "3"}
        ),
        # The minimum comes from the PodGroup object alone.
        "podgroup": create_gang(cluster, "pg", 3, 3, cpu="500m", labels={POD_GROUP: "pg"}),
    }
    everyone = [n for names in gangs.values() for n in names]
    cluster.wait_bound(everyone, timeout=120)
    watch_all_or_nothing(cluster, gangs, 1)


def test_a_podgroup_minimum_below_its_size_holds_the_first_members_back_until_it_is_met(cluster: Cluster) -> None:
    cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    create_podgroup(cluster, "four", 4)
    first = create_gang(cluster, "four", 3, 4, cpu="500m", labels={POD_GROUP: "four"})
    watch_all_or_nothing(cluster, {"four": first}, 5)
    assert bound(cluster, first) == []
    rest = create_gang(cluster, "four", 2, 4, cpu="500m", labels={POD_GROUP: "four"}, start=3)
    cluster.wait_bound(first + rest, timeout=60)


def test_a_gang_of_a_driver_and_workers_on_different_nodes_completes(cluster: Cluster) -> None:
    """Members with different node selectors: each is checked against the nodes it may use."""
    driver_node = cluster.node("driver", cpu="2", labels={"role": "driver"})
    workers_nodes = cluster.nodes(3, prefix="w", cpu="4", labels={"role": "worker"})
    cluster.wait_synced()
    workers = [f"job-worker-{i}" for i in range(3)]
    for name in workers:
        cluster.pod(name, requests=resources(cpu="3"), labels=legacy("job", 4), nodeSelector={"role": "worker"})
    cluster.pod("job-driver", requests=resources(cpu="1"), labels=legacy("job", 4), nodeSelector={"role": "driver"})
    placed = cluster.wait_bound([*workers, "job-driver"], timeout=60)
    assert placed["job-driver"] == driver_node
    assert sorted(placed[w] for w in workers) == sorted(workers_nodes)
