"""A replica SIGKILLed under the real kube-scheduler, which reaches the replicas through the balancer:
the watch moves to the survivor within the lease, and a burst of pods in flight still ends with every
pod bound, within each node's capacity. Each test brings the killed replica back on its port."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from devstack.controlplane import ControlPlane
from devstack.kube import resources, wait_for
from devstack.metrics import sample_total
from devstack.replica import ServerProcess
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 3.0
# The lease lapses at most LEASE_SECONDS after the victim's last renewal; the survivor campaigns just
# after that. The margin covers polling /readyz and a loaded machine.
TAKEOVER_MARGIN = 1.5
# How long the victim is frozen before the kill: kube-scheduler's calls routed to it pile up meanwhile
# (well inside its 5 s extender timeout).
FROZEN_SECONDS = 1.5
# From this minor kube-scheduler retries a pod whose attempt failed on an error after a backoff itself.
QUEUEING_HINTS_MINOR = 32


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2, env={"EXTENDER_LEASE_SECONDS": f"{LEASE_SECONDS:g}"})


def binds_answered(replica: ServerProcess) -> float:
    """The bind calls this replica answered, from its /metrics."""
    return sample_total(replica.get("/metrics").text, "extender_requests_total", verb="bind")


@pytest.fixture
def revive(stack: Stack) -> Iterator[list[int]]:
    """Indexes of replicas a test killed; each is started again on its port afterwards."""
    killed: list[int] = []
    yield killed
    for index in killed:
        stack.restart_replica(index)


def test_the_watch_moves_to_the_survivor_within_the_lease(cluster: Cluster, stack: Stack, revive: list[int]) -> None:
    """The replica leading the watch is SIGKILLed: the survivor takes the lease within the lease time
    (plus a small margin), and a pod created right after the kill is bound through the survivor."""
    nodes = cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    victim_index = stack.leader_index()
    victim, survivor = stack.replicas[victim_index], stack.replicas[1 - victim_index]
    binds_before = binds_answered(survivor)

    revive.append(victim_index)
    victim.kill()
    killed = time.monotonic()
    cluster.pod("after-kill", requests=resources(cpu="1"))

    def survivor_leads() -> float | None:
        return time.monotonic() if survivor.readiness().get("is_leader") is True else None

    took = wait_for(survivor_leads, LEASE_SECONDS + 30, "the survivor leads", interval=0.05) - killed
    assert took <= LEASE_SECONDS + TAKEOVER_MARGIN, f"took the lease {took:.2f}s after the kill"
    placed = cluster.wait_bound(["after-kill"], timeout=60)
    assert placed["after-kill"] in nodes
    assert binds_answered(survivor) > binds_before, "the pod created after the kill was bound through the survivor"
    assert survivor.readiness()["synced"] is True
    print(f"leadership moved {took:.2f}s after the SIGKILL (lease {LEASE_SECONDS:g}s)")


BURST_NODES = 5
NODE_CPU = 8
BURST_PODS = BURST_NODES * NODE_CPU  # one CPU each: the pods fill every node exactly
HEAD_PODS = 8  # created before the freeze; the rest while the victim is frozen


def test_a_replica_killed_during_a_burst_leaves_every_pod_bound_within_capacity(
    cluster: Cluster, stack: Stack, revive: list[int], control_plane: ControlPlane
) -> None:
    """The leader, which kube-scheduler's calls reach, is frozen once a few pods of a burst are bound; the
    rest of the burst is created meanwhile, so calls hang on it, and it is SIGKILLed with them in flight.
    kube-scheduler parks the pods whose call failed (1.28 retries them only on some unrelated event or
    after five minutes; with queueing hints, from 1.32 by default, it retries them itself after a backoff);
    the survivor, leading the watch now, requeues those still parked, and every pod ends up bound with no
    node over its capacity; the survivor's snapshot then counts exactly the bound pods."""
    nodes = cluster.nodes(BURST_NODES, cpu=str(NODE_CPU))
    cluster.wait_synced()
    victim_index = stack.leader_index()
    victim, survivor = stack.replicas[victim_index], stack.replicas[1 - victim_index]
    balancer = stack.balancer
    assert balancer is not None
    names = [f"burst-{i}" for i in range(BURST_PODS)]
    # No pod is pending, so kube-scheduler's keep-alive connections are idle: dropping them makes its
    # next calls open new ones, which the pin sends to the victim.
    balancer.pin(victim.port)
    balancer.drop_clients()
    try:
        for name in names[:HEAD_PODS]:
            cluster.pod(name, requests=resources(cpu="1"))
        wait_for(lambda: sum(1 for n in cluster.placement().values() if n) >= 3, 60, "a few pods bound")
        revive.append(victim_index)
        os.kill(victim.proc.pid, signal.SIGSTOP)
        frozen = time.monotonic()
        sent_before = balancer.sent.get(victim.port, 0)
        for name in names[HEAD_PODS:]:
            cluster.pod(name, requests=resources(cpu="1"))
        # A call kube-scheduler sent since the freeze hangs on the victim: the kill must strike one (on a
        # loaded machine kube-scheduler may send none within a fixed wait).
        wait_for(lambda: balancer.sent.get(victim.port, 0) > sent_before, 60, "a call reached the frozen replica")
        time.sleep(max(0.0, FROZEN_SECONDS - (time.monotonic() - frozen)))
        bound_at_kill = sum(1 for n in cluster.placement().values() if n)
        victim.kill()
    finally:
        balancer.pin(None)
    assert bound_at_kill < BURST_PODS, "every pod was bound before the kill: nothing was in flight"

    placed = cluster.wait_bound(names, timeout=120)
    per_node = Counter(placed.values())
    assert set(per_node) <= set(nodes)
    assert all(count <= NODE_CPU for count in per_node.values()), per_node
    assert sum(per_node.values()) == BURST_PODS

    def snapshot_counts_the_pods() -> bool:
        for node in nodes:
            doc = survivor.get(f"/v1/nodes/{node}", timeout=5).json()
            if doc["requested"].get("cpu") != per_node[node] * 1000 or any(p["assumed"] for p in doc["pods"]):
                return False
        return True

    wait_for(snapshot_counts_the_pods, 60, "the survivor's snapshot counts exactly the bound pods")
    assert stack.scheduler is not None
    failed_calls = stack.scheduler.log(tail=10**8).count("Error scheduling pod; retrying")
    assert failed_calls >= 1, "no extender call failed: the kill struck no call in flight"
    if int(control_plane.version.split(".")[1]) < QUEUEING_HINTS_MINOR:
        # Nothing but the survivor retries them before five minutes: it must have requeued them.
        assert "scheduling attempt failed on an error" in survivor.log(), "the survivor requeued no parked pod"
    print(f"killed the leader with {bound_at_kill} of {BURST_PODS} pods bound; {failed_calls} calls failed; all bound")
