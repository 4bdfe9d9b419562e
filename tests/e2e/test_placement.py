"""Plain pods through the real kube-scheduler with our filter, prioritize, preempt and bind.

(Plain pods filling each node to its capacity is a shared scenario: tests/e2e/scenarios.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.kube import resources
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack

pytestmark = pytest.mark.e2e

GPU = "example.com/gpu"
ZONE = "topology.kubernetes.io/zone"


def test_taints_node_selectors_and_node_affinity(cluster: Cluster) -> None:
    tainted = cluster.node("tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    zone_a = cluster.node("za", labels={ZONE: "a"})
    zone_b = cluster.node("zb", labels={ZONE: "b"})
    cluster.wait_synced()
    host = "kubernetes.io/hostname"
    cluster.pod(
        "tolerant",
        nodeSelector={host: tainted},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    )
    cluster.pod("intolerant", nodeSelector={host: tainted})
    cluster.pod("selector-a", nodeSelector={ZONE: "a"})
    required_b: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    cluster.pod("affinity-b", affinity=required_b)
    placed = cluster.wait_bound(["tolerant", "selector-a", "affinity-b"])
    assert (placed["tolerant"], placed["selector-a"], placed["affinity-b"]) == (tainted, zone_a, zone_b)
    cluster.stays_unbound(["intolerant"], 3)


def test_an_extended_resource_kube_scheduler_ignores_is_counted_by_the_extender(
    kube: Any, stack_factory: StartStack
) -> None:
    """Registered under managedResources with ignoredByScheduler, only our filter counts GPUs."""
    stack: Stack = stack_factory(managed_resources=[GPU])
    cluster = Cluster(kube, stack, f"e2e-gpu-{stack.name[-6:]}")
    kube.create_namespace(cluster.namespace)
    try:
        one = cluster.node("gpu1", cpu="8", extended={GPU: "1"})
        four = cluster.node("gpu4", cpu="8", extended={GPU: "4"})
        cluster.wait_synced()
        cluster.pod("two", requests=resources(cpu="1", **{GPU: "2"}))
        assert cluster.wait_bound(["two"])["two"] == four
        # Two GPUs are left on gpu4 and one on gpu1: three fit nowhere, though kube-scheduler alone
        # (which ignores the resource) would bind it.
        cluster.pod("three", requests=resources(cpu="1", **{GPU: "3"}))
        cluster.stays_unbound(["three"], 4)
        cluster.pod("one", requests=resources(cpu="1", **{GPU: "1"}))
        assert cluster.wait_bound(["one"])["one"] in (one, four)
        cluster.kube.delete_pod(cluster.namespace, "two")
        placed = cluster.wait_bound(["three"])
        assert placed["three"] == four
    finally:
        cluster.cleanup()


@pytest.mark.every_release
def test_preemption_spares_the_pod_a_disruption_budget_protects(cluster: Cluster) -> None:
    guarded_node = cluster.node("guarded", cpu="4")
    plain_node = cluster.node("plain", cpu="4")
    cluster.wait_synced()
    ns = cluster.namespace
    pdb = cluster.kube.create(
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    # No disruption controller runs here: write the status it would (no disruption allowed).
    pdb["status"] = {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    resp = cluster.kube.http.put(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/guard/status", json=pdb)
    resp.raise_for_status()
    # Low-priority pods already running, one per node.
    cluster.pod(
        "guarded",
        requests=resources(cpu="3"),
        labels={"app": "guarded"},
        priorityClassName="e2e-low",
        nodeName=guarded_node,
    )
    cluster.pod(
        "plain", requests=resources(cpu="3"), labels={"app": "plain"}, priorityClassName="e2e-low", nodeName=plain_node
    )
    cluster.wait_bound(["guarded", "plain"])

    preempts = cluster.stack.requests("preempt")
    cluster.pod("urgent", requests=resources(cpu="3"), priorityClassName="e2e-high")
    placed = cluster.wait_bound(["urgent"], timeout=60)
    assert cluster.stack.requests("preempt") > preempts  # kube-scheduler asked our preempt verb
    assert placed["urgent"] == plain_node
    remaining = cluster.placement()
    assert remaining.get("guarded") == guarded_node
    assert "plain" not in remaining
