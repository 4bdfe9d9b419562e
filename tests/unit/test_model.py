"""Scheduling views: reduction from API objects, record round-trips, NodeInfo aggregates."""

from __future__ import annotations

from typing import Any

import orjson

from extenders.model import NodeFacts, NodeInfo, Owner, PDBInfo, PodGroupInfo, PodInfo, Taint

GI = 2**30


def full_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u-1",
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "deletionTimestamp": "2024-01-02T00:00:00Z",
            "ownerReferences": [
                {"kind": "Other", "name": "x", "uid": "o-0"},
                {"kind": "ReplicaSet", "name": "web", "uid": "o-1", "controller": True},
            ],
        },
        "spec": {
            "nodeName": "n1",
            "priority": 100,
            "preemptionPolicy": "Never",
            "schedulerName": "my-scheduler",
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "z"}]}},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "tmp", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "image": "nginx:1",
                    "resources": {"requests": {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}],
                }
            ],
            "initContainers": [
                {
                    "name": "init",
                    "image": "busybox",
                    "ports": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
                }
            ],
        },
        "status": {"phase": "Running", "startTime": "2024-01-01T00:00:05Z"},
    }


def test_pod_from_k8s_keeps_what_scheduling_reads() -> None:
    pod = PodInfo.from_k8s(full_pod())
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


def test_pod_record_round_trip_through_json() -> None:
    pod = PodInfo.from_k8s(full_pod())
    pod.assumed = True
    back = PodInfo.from_record(orjson.loads(orjson.dumps(pod.to_record())))
    assert back == pod


def test_minimal_pod_record_is_compact_and_round_trips() -> None:
    pod = PodInfo.from_k8s({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}})
    assert pod.namespace == "default" and pod.best_effort and pod.owner is None
    rec = pod.to_record()
    assert set(rec) == {"ns", "n", "u", "nzc", "nzm", "be"}
    assert PodInfo.from_record(orjson.loads(orjson.dumps(rec))) == pod


def test_terminal_phases() -> None:
    for phase, terminal in (("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False)):
        assert PodInfo(namespace="d", name="p", uid="u", phase=phase).terminal is terminal


def node_object() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n1",
            "uid": "nu",
            "resourceVersion": "42",
            "labels": {"zone": "a"},
            "annotations": {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}", "other": "dropped"},
        },
        "spec": {
            "unschedulable": True,
            "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "e", "effect": "NoExecute"}],
        },
        "status": {
            "allocatable": {"cpu": "3920m", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"},
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}],
            "images": [{"names": ["nginx:1", "nginx@sha256:x"], "sizeBytes": 1000}],
        },
    }


def test_node_facts_from_k8s() -> None:
    facts = NodeFacts.from_k8s(node_object())
    assert facts.name == "n1" and facts.uid == "nu" and facts.resource_version == "42"
    assert facts.allocatable == {"cpu": 3920, "memory": 16 * GI, "pods": 110, "nvidia.com/gpu": 2}
    assert facts.taints == [Taint("k", "v", "NoSchedule"), Taint("e", "", "NoExecute")]
    assert facts.unschedulable
    assert facts.conditions == {"Ready": "True", "DiskPressure": "False"}
    assert facts.images == {"nginx:1": 1000, "nginx@sha256:x": 1000}
    assert facts.annotations == {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}"}


def test_node_facts_round_trip() -> None:
    facts = NodeFacts.from_k8s(node_object())
    assert NodeFacts.from_record(orjson.loads(orjson.dumps(facts.to_record()))) == facts


def test_pdb_round_trip() -> None:
    pdb = PDBInfo.from_k8s(
        {
            "metadata": {"name": "b", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 2},
        }
    )
    assert (pdb.key, pdb.disruptions_allowed, pdb.selector) == ("ns/b", 2, {"matchLabels": {"app": "web"}})
    assert PDBInfo.from_record(orjson.loads(orjson.dumps(pdb.to_record()))) == pdb


def test_podgroup_round_trip() -> None:
    group = PodGroupInfo.from_k8s(
        {
            "metadata": {"name": "g", "namespace": "ml", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 30},
        }
    )
    assert (group.key, group.min_member, group.schedule_timeout_seconds) == ("ml/g", 4, 30)
    rec = group.to_record()
    assert rec["minMember"] == 4 and rec["creationTimestamp"] == "2024-01-01T00:00:00Z"
    assert PodGroupInfo.from_record("ml/g", orjson.loads(orjson.dumps(rec))) == group
    bare = PodGroupInfo.from_k8s({"metadata": {"name": "h"}, "spec": {}})
    assert PodGroupInfo.from_record(bare.key, bare.to_record()) == bare


def pod(uid: str, cpu: int, ports: list[tuple[str, str, int]] | None = None, **kw: Any) -> PodInfo:
    return PodInfo(
        namespace="d",
        name=uid,
        uid=uid,
        requests={"cpu": cpu, "memory": 10},
        nonzero_cpu=cpu,
        nonzero_memory=10,
        host_ports=ports or [],
        **kw,
    )


def test_node_info_aggregates_add_replace_remove() -> None:
    facts = NodeFacts(name="n", allocatable={"cpu": 4000})
    anti: dict[str, Any] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}
    info = NodeInfo.build("n", facts, [pod("a", 100, [("TCP", "0.0.0.0", 80)]), pod("b", 200, affinity=anti)], 5)
    assert info.generation == 5 and info.allocatable == {"cpu": 4000}
    assert info.requested == {"cpu": 300, "memory": 20}
    assert info.requested_with_pods() == {"cpu": 300, "memory": 20, "pods": 2}
    assert (info.nonzero_cpu, info.used_ports) == (300, {("TCP", "0.0.0.0", 80)})
    assert [p.uid for p in info.pods_with_affinity] == ["b"]
    assert [p.uid for p in info.pods_with_required_anti_affinity] == ["b"]
    info.add_pod(pod("a", 50))  # replaces, not adds
    assert info.requested == {"cpu": 250, "memory": 20} and info.used_ports == set()
    assert info.remove_pod("b") is not None
    assert info.remove_pod("missing") is None
    assert info.requested == {"cpu": 50, "memory": 10} and info.pods_with_affinity == []
    info.remove_pod("a")
    assert info.requested == {} and info.nonzero_cpu == 0 and info.requested_with_pods() == {"pods": 0}


def test_node_info_without_node_object() -> None:
    info = NodeInfo.build("ghost", None, [pod("a", 100)])
    assert info.allocatable == {} and info.labels == {} and info.requested["cpu"] == 100
