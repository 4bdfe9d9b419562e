"""Kubernetes objects as the API server serves them, for tests: Ready nodes, pods, PDBs, pod groups,
namespaces, claims, services and workloads with a pod template."""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[Json] | None = None,
    extra_allocatable: dict[str, str] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Json:
    """A node as a kubelet registers it: capacity = allocatable, Ready and the pressure conditions."""
    allocatable = {
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "ephemeral-storage": "100Gi",
        **(extra_allocatable or {}),
    }
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": ""}
        for t, r in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "",
        }
    )
    spec: Json = {}
    if taints:
        spec["taints"] = copy.deepcopy(taints)
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.0", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def make_pod(
    name: str,
    namespace: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    extra_requests: dict[str, str] | None = None,
    phase: str | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[Json] | None = None,
    scheduler_name: str | None = None,
) -> Json:
    """A one-container pod; `phase` defaults to Running when `node_name` is set, else Pending."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra_requests or {})
    container: Json = {"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    spec: Json = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = copy.deepcopy(tolerations)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    metadata: Json = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    status: Json = {"phase": phase or ("Running" if node_name else "Pending")}
    if node_name:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def make_pdb(
    name: str,
    namespace: str = "default",
    match_labels: dict[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 0,
    current_healthy: int = 0,
    desired_healthy: int = 0,
    expected_pods: int = 0,
) -> Json:
    """A policy/v1 PDB; the status fields stand in for what the disruption controller would write."""
    spec: Json = {"selector": {"matchLabels": dict(match_labels or {})}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": current_healthy,
            "desiredHealthy": desired_healthy,
            "expectedPods": expected_pods,
            "observedGeneration": 1,
        },
    }


def make_podgroup(
    name: str,
    namespace: str = "default",
    min_member: int = 1,
    min_resources: dict[str, str] | None = None,
    schedule_timeout_seconds: int | None = None,
) -> Json:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1)."""
    spec: Json = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = dict(min_resources)
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def make_namespace(name: str, labels: dict[str, str] | None = None) -> Json:
    """A v1.Namespace (the server adds its kubernetes.io/metadata.name label)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def make_pvc(name: str, namespace: str = "default", access_modes: list[str] | None = None) -> Json:
    """A v1.PersistentVolumeClaim asking for 1Gi with ``access_modes`` (ReadWriteOnce by default)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": list(access_modes or ["ReadWriteOnce"]),
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def make_service(name: str, namespace: str = "default", selector: dict[str, str] | None = None) -> Json:
    """A ClusterIP v1.Service on port 80 selecting ``selector`` (none: a Service without a selector)."""
    spec: Json = {"ports": [{"port": 80, "protocol": "TCP"}]}
    if selector is not None:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _template(labels: dict[str, str]) -> Json:
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def make_workload(
    kind: str, name: str, namespace: str = "default", selector: Json | None = None, replicas: int = 1
) -> Json:
    """A ReplicationController (``selector`` a label map), ReplicaSet or StatefulSet (a LabelSelector)
    with a pod template carrying the selector's labels."""
    if kind == "ReplicationController":
        labels = dict(selector or {})
        return {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": labels, "template": _template(labels)},
        }
    label_selector = selector if selector is not None else {"matchLabels": {"app": name}}
    spec: Json = {
        "replicas": replicas,
        "selector": label_selector,
        "template": _template(label_selector.get("matchLabels") or {}),
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}
