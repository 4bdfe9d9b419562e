"""The real kube-scheduler while the watch leader is frozen: its informer sees a pod go before our
snapshot can. A preemptor retried then must neither be refused nor preempt a second time; a pod
refused then must be requeued when the watch writes the deletion, however recently it was requeued."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.kube import Kube, resources, wait_for
from devstack.metrics import sample_total
from devstack.replica import ServerProcess
from devstack.stack import Stack
from extenders.kube.requeue import REQUEUE_ANNOTATION
from tests.e2e.conftest import Cluster, StartStack

pytestmark = pytest.mark.e2e

# Longer than the whole frozen stretch on a loaded machine: the follower must not take the lease
# (and with it a fresh view of the cluster) before kube-scheduler retries the preemptor.
LEASE_SECONDS = 30.0
RETRY_SECONDS = 20.0  # kube-scheduler retries a preemptor about a second after its victim goes
RETRIES = "extender_preemptor_retries_total"
GPU = "example.com/gpu"
QUIET_SECONDS = 2.5  # longer than kube-scheduler's backoff after a pod's second attempt


@contextlib.contextmanager
def calls_pinned_to(stack: Stack, replica: ServerProcess) -> Iterator[None]:
    """kube-scheduler's calls, on new connections, reach ``replica`` alone."""
    balancer = stack.balancer
    assert balancer is not None
    balancer.pin(replica.port)
    balancer.drop_clients()
    try:
        yield
    finally:
        balancer.pin(None)


@contextlib.contextmanager
def frozen(replica: ServerProcess) -> Iterator[None]:
    """The replica stopped (SIGSTOP): its watch writes nothing and it answers nothing."""
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)


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
    with calls_pinned_to(stack, follower):
        with frozen(leader):
            cluster.pod("urgent", requests=resources(cpu="3"), priorityClassName="e2e-high")
            wait_for(lambda: len(set(low) & set(cluster.placement())) < len(low), 30, "kube-scheduler took a victim")
            wait_for(
                lambda: retries("passed") > passed,
                RETRY_SECONDS,
                "the retried preemptor passed filter on the victim our snapshot still holds",
            )
            assert follower.readiness().get("is_leader") is False, "the follower took the lease: its view is fresh"
        placed = cluster.wait_bound(["urgent"], timeout=60)
    time.sleep(2)  # a second preemption would have deleted the other pod by now
    remaining = cluster.placement()
    assert len(set(low) & set(remaining)) == 1, f"one victim for one preemptor: {remaining}"
    assert placed["urgent"] in nodes
    assert retries("bound") > waited, "its bind did not wait for the watch"


@pytest.mark.every_release
def test_a_pod_requeued_then_refused_behind_the_watch_is_requeued_when_the_watch_writes(
    kube: Kube, stack_factory: StartStack
) -> None:
    """Only our filter counts GPUs. ``three`` is refused and requeued (a pod placed elsewhere); then,
    the watch leader frozen, the pod that holds its GPUs goes: kube-scheduler retries ``three`` at once
    and the other replica refuses it on a snapshot that still has that pod. When the leader thaws and
    writes the deletion, a few seconds after the first requeue, ``three`` must be requeued again: no
    other event comes, and kube-scheduler's own flush of parked pods waits five minutes."""
    stack = stack_factory(replicas=2, managed_resources=[GPU], env={"EXTENDER_LEASE_SECONDS": f"{LEASE_SECONDS:g}"})
    cluster = Cluster(kube, stack, f"e2e-rq-{stack.name[-6:]}")
    kube.create_namespace(cluster.namespace)
    pods = f"/api/v1/namespaces/{cluster.namespace}/pods"
    try:
        gpu = cluster.node("gpu", cpu="8", extended={GPU: "4"})
        other = cluster.node("other", cpu="8")
        cluster.wait_synced()
        cluster.pod("big", requests=resources(cpu="1", **{GPU: "3"}), nodeName=gpu)
        leader = stack.replicas[stack.leader_index()]
        follower = next(r for r in stack.replicas if r is not leader)
        wait_for(
            lambda: all(
                "big" in {p["name"] for p in r.get(f"/v1/nodes/{gpu}", timeout=5).json()["pods"]}
                for r in stack.replicas
            ),
            30,
            "both snapshots hold big",
        )

        def three() -> dict[str, Any]:
            pod = kube.get(f"{pods}/three")
            assert pod is not None
            return pod

        def parked() -> bool:
            conditions = three().get("status", {}).get("conditions") or []
            return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

        def requeued_at() -> str | None:
            return (three()["metadata"].get("annotations") or {}).get(REQUEUE_ANNOTATION)

        def filters(replica: ServerProcess) -> float:
            return sample_total(replica.get("/metrics").text, "extender_requests_total", verb="filter")

        def total() -> float:
            return filters(leader) + filters(follower)

        cluster.pod("three", requests=resources(cpu="1", **{GPU: "3"}))
        wait_for(parked, 30, "kube-scheduler parked three on our refusal")
        at_park = total()
        # A pod placed is a change kube-scheduler retries parked pods on: the watch's write of it hands
        # back three's refusal of a moment before. A later filler catches a later refusal, should the
        # first come too late for the refusal window.
        fillers = 0

        def first_requeue() -> str | None:
            nonlocal fillers
            if (stamp := requeued_at()) is None:
                cluster.pod(f"filler-{fillers}", requests=resources(cpu="10m"), nodeName=other)
                fillers += 1
            return stamp

        first = wait_for(first_requeue, 30, "three requeued once", interval=1.0)
        # Its retries on those events (one, or two when the requeue came after the filler's) are over
        # before the freeze: no filter call for a while, and at least one since three was parked.
        seen, since = total(), time.monotonic()

        def parked_again() -> bool:
            nonlocal seen, since
            if (now := total()) != seen:
                seen, since = now, time.monotonic()
            return seen > at_park and time.monotonic() - since > QUIET_SECONDS

        wait_for(parked_again, 30, "kube-scheduler retried three after its requeue and parked it again")

        def requeues() -> float:
            return sum(sample_total(r.get("/metrics").text, "extender_requeues_total") for r in stack.replicas)

        requeued_before = requeues()
        with calls_pinned_to(stack, follower):
            with frozen(leader):
                asked = filters(follower)
                kube.delete_pod(cluster.namespace, "big")
                wait_for(
                    lambda: filters(follower) > asked,
                    RETRY_SECONDS,
                    "kube-scheduler retried three on big's deletion, at the replica whose snapshot still has big",
                    interval=0.05,
                )
            assert three()["spec"].get("nodeName") is None, "three passed a filter on a snapshot that holds big"
        placed = cluster.wait_bound(["three"], timeout=45)
        assert placed["three"] == gpu
        assert requeued_at() != first, "bound without a second requeue: the test did not stage the lag"
        assert requeues() > requeued_before
    finally:
        cluster.cleanup()
