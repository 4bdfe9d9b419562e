"""Kubernetes objects reduced to the scheduling view: what each keeps and drops."""

from __future__ import annotations

from extenders.convert import node_facts, pod_info
from extenders.model import Owner, Taint
from tests.unit.k8s_objects import full_pod, node_object

GI = 2**30


def test_pod_from_k8s_keeps_what_scheduling_reads() -> None:
    pod = pod_info(full_pod())
    assert (pod.namespace, pod.name, pod.uid, pod.key) == ("shop", "web-1", "u-1", "shop/web-1")
    assert pod.node_name == "n1" and pod.phase == "Running" and pod.priority == 100
    assert pod.preemption_policy == "Never" and pod.scheduler_name == "my-scheduler"
    assert pod.requests == {"cpu": 250, "memory": GI, "nvidia.com/gpu": 1}
    # the init container is defaulted to 100m / 200Mi, below the main container: the max is the main one
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (250, GI)
    assert not pod.best_effort
    assert sorted(pod.host_ports) == [("TCP", "0.0.0.0", 8080), ("UDP", "10.0.0.1", 53)]
    assert pod.volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    assert pod.images == ["nginx:1"]
    assert pod.owner == Owner("ReplicaSet", "web", "o-1")
    assert pod.terminating and not pod.terminal
    assert pod.has_pod_affinity() and pod.has_required_anti_affinity()


def test_node_facts_from_k8s() -> None:
    facts = node_facts(node_object())
    assert facts.name == "n1" and facts.uid == "nu" and facts.resource_version == "42"
    assert facts.allocatable == {"cpu": 3920, "memory": 16 * GI, "pods": 110, "nvidia.com/gpu": 2}
    assert facts.taints == [Taint("k", "v", "NoSchedule"), Taint("e", "", "NoExecute")]
    assert facts.unschedulable
    assert facts.conditions == {"Ready": "True", "DiskPressure": "False"}
    assert facts.images == {"nginx:1": 1000, "nginx@sha256:x": 1000}
    assert facts.annotations == {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}"}
