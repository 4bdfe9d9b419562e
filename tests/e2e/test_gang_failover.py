"""A replica holding gang members at bind is SIGKILLed: nothing partial is bound, and the gang
completes through the surviving replica (kube-scheduler reaches it through the balancer)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from devstack import http_client
from devstack.kube import resources, wait_for
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack
from tests.e2e.test_gangs import bound, legacy

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2)


def gang_doc(url: str, namespace: str, gang: str) -> dict[str, Any]:
    resp = http_client.get(f"{url}/v1/gangs/{namespace}/{gang}", timeout=5)
    return resp.json() if resp.status_code == 200 else {}


def test_killing_the_replica_that_holds_members_binds_nothing_partial(cluster: Cluster, stack: Stack) -> None:
    nodes = cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    names = [f"ha-{i}" for i in range(4)]
    for name in names[:3]:
        cluster.pod(name, requests=resources(cpu="3"), labels=legacy("ha", 4))
    # The fourth member can go nowhere until a node labelled for it comes: three members end up
    # held at bind, waiting for it.
    cluster.pod(names[3], requests=resources(cpu="3"), labels=legacy("ha", 4), nodeSelector={"role": "late"})
    survivor_url = stack.replicas[0].url

    def held() -> list[dict[str, Any]]:
        arrived: list[dict[str, Any]] = gang_doc(survivor_url, cluster.namespace, "ha").get("arrived") or []
        return arrived if len(arrived) == 3 else []

    arrivals = wait_for(held, 60, "three members held at bind")
    by_replica: dict[str, int] = {}
    for arrival in arrivals:
        by_replica[arrival["replica"]] = by_replica.get(arrival["replica"], 0) + 1
    victim = max(stack.replicas, key=lambda r: by_replica.get(r.name, 0))
    survivor = next(r for r in stack.replicas if r is not victim)
    assert by_replica.get(victim.name, 0) >= 1
    victim.kill()

    # The survivor leads the watch (it may have been the leader already) before the node changes.
    def leading() -> bool:
        resp = http_client.get(f"{survivor.url}/readyz", timeout=5)
        return resp.status_code == 200 and resp.json().get("is_leader") is True

    wait_for(leading, 30, "the surviving replica leads")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        assert bound(cluster, names) == [], "a member was bound before the gang was complete"
        time.sleep(0.3)
    late = cluster.node("late", cpu="4", labels={"role": "late"})
    placed = cluster.wait_bound(names, timeout=90)
    assert placed[names[3]] == late
    assert set(placed[n] for n in names[:3]) < set(nodes)
    assert victim.proc.poll() is not None  # the gang completed without the killed replica
