"""A preemptor retried by the real kube-scheduler while the watch leader is frozen: kube-scheduler's
informer sees the victim go before our snapshot can, and the extender must neither refuse the retry
nor preempt a second time."""

from __future__ import annotations

import os
import signal
import time

import pytest

from devstack.kube import resources, wait_for
from devstack.metrics import sample_total
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack

pytestmark = pytest.mark.e2e

# Longer than the whole frozen stretch on a loaded machine: the follower must not take the lease
# (and with it a fresh view of the cluster) before kube-scheduler retries the preemptor.
LEASE_SECONDS = 30.0
RETRY_SECONDS = 20.0  # kube-scheduler retries a preemptor about a second after its victim goes
RETRIES = "extender_preemptor_retries_total"


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2, env={"EXTENDER_LEASE_SECONDS": f"{LEASE_SECONDS:g}"})


@pytest.mark.every_release
def test_a_preemptor_retried_while_the_watch_is_frozen_takes_one_victim(cluster: Cluster, stack: Stack) -> None:
    """The watch leader is frozen before a preemptor comes, and kube-scheduler's calls reach only the
    other replica: the preemptor's victim goes, kube-scheduler's informer sees it and retries the
    preemptor, while our snapshot still holds the victim (nothing writes the watch's events). The retry
    must pass and its bind wait for the watch, not preempt the other pod."""
    nodes = cluster.nodes(2, cpu="4")
    cluster.wait_synced()
    low = [f"low-{i}" for i in range(len(nodes))]
    for name, node in zip(low, nodes, strict=True):
        cluster.pod(name, requests=resources(cpu="3"), priorityClassName="e2e-low", nodeName=node)
    cluster.wait_bound(low)
    leader = stack.replicas[stack.leader_index()]
    follower = next(r for r in stack.replicas if r is not leader)

    def holds_low() -> bool:
        held = {p["name"] for node in nodes for p in follower.get(f"/v1/nodes/{node}", timeout=5).json()["pods"]}
        return set(low) <= held

    def retries(outcome: str) -> float:  # the follower's alone: the frozen leader answers nothing
        return sample_total(follower.get("/metrics").text, RETRIES, outcome=outcome)

    wait_for(holds_low, 30, "the follower's snapshot holds the low pods")
    passed, waited = retries("passed"), retries("bound")
    balancer = stack.balancer
    assert balancer is not None
    balancer.pin(follower.port)
    balancer.drop_clients()
    try:
        os.kill(leader.proc.pid, signal.SIGSTOP)
        try:
            cluster.pod("urgent", requests=resources(cpu="3"), priorityClassName="e2e-high")
            wait_for(lambda: len(set(low) & set(cluster.placement())) < len(low), 30, "kube-scheduler took a victim")
            wait_for(
                lambda: retries("passed") > passed,
                RETRY_SECONDS,
                "the retried preemptor passed filter on the victim our snapshot still holds",
            )
            assert follower.readiness().get("is_leader") is False, "the follower took the lease: its view is fresh"
        finally:
            os.kill(leader.proc.pid, signal.SIGCONT)
        placed = cluster.wait_bound(["urgent"], timeout=60)
    finally:
        balancer.pin(None)
    time.sleep(2)  # a second preemption would have deleted the other pod by now
    remaining = cluster.placement()
    assert len(set(low) & set(remaining)) == 1, f"one victim for one preemptor: {remaining}"
    assert placed["urgent"] in nodes
    assert retries("bound") > waited, "its bind did not wait for the watch"
