"""Kubernetes objects (as JSON) reduced to the scheduling view, once, on ingest.

The watcher, the binder and the web layer all call these, so the predicates never walk a
full v1.Pod and each Kubernetes field is read in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.model import (
    DEFAULT_NAMESPACE,
    PREEMPT_LOWER_PRIORITY,
    PREFER_AVOID_PODS_ANNOTATION,
    WILDCARD_IP,
    HostPort,
    NodeFacts,
    Owner,
    PDBInfo,
    PodGroupInfo,
    PodInfo,
    Taint,
)
from extenders.quantity import resource_amount
from extenders.resources import is_best_effort, pod_nonzero_requests, pod_requests

# Volume sources that NoDiskConflict still checks; the others are dropped on ingest.
CONFLICT_VOLUME_KEYS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi", "persistentVolumeClaim")


def _host_ports(spec: Mapping[str, Any]) -> list[HostPort]:
    ports: list[HostPort] = []
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for port in container.get("ports") or []:
            host_port = int(port.get("hostPort") or 0)
            if host_port <= 0:
                continue
            ports.append((port.get("protocol") or "TCP", port.get("hostIP") or WILDCARD_IP, host_port))
    return ports


def _controller(meta: Mapping[str, Any]) -> Owner | None:
    """The controlling owner reference (or the first one, as the spreading priorities read it)."""
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return Owner(kind=chosen.get("kind", ""), name=chosen.get("name", ""), uid=chosen.get("uid", ""))


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object, with the API server's default namespace."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or DEFAULT_NAMESPACE}/{meta.get('name') or ''}"


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """A v1.Pod's scheduling view. Raises ValueError on bad quantities."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    images = [c.get("image", "") for c in spec.get("containers") or [] if c.get("image")]
    volumes = [
        {k: v for k, v in vol.items() if k in CONFLICT_VOLUME_KEYS or k == "name"}
        for vol in spec.get("volumes") or []
        if any(k in vol for k in CONFLICT_VOLUME_KEYS)
    ]
    nonzero_cpu, nonzero_memory = pod_nonzero_requests(spec)
    return PodInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        node_name=spec.get("nodeName") or "",
        phase=status.get("phase") or "",
        priority=int(spec.get("priority") or 0),
        preemption_policy=spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY,
        scheduler_name=spec.get("schedulerName") or "",
        requests=pod_requests(spec),
        nonzero_cpu=nonzero_cpu,
        nonzero_memory=nonzero_memory,
        best_effort=is_best_effort(spec),
        host_ports=_host_ports(spec),
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=dict(spec.get("affinity") or {}),
        tolerations=list(spec.get("tolerations") or []),
        topology_spread=list(spec.get("topologySpreadConstraints") or []),
        volumes=volumes,
        images=images,
        deletion_timestamp=meta.get("deletionTimestamp"),
        creation_timestamp=meta.get("creationTimestamp"),
        start_time=status.get("startTime"),
        owner=_controller(meta),
    )


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    """A v1.Node's scheduling view. Raises ValueError on bad quantities."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    images: dict[str, int] = {}
    for image in status.get("images") or []:
        for name in image.get("names") or []:
            images[name] = int(image.get("sizeBytes") or 0)
    annotations = meta.get("annotations") or {}
    return NodeFacts(
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=dict(meta.get("labels") or {}),
        annotations={k: v for k, v in annotations.items() if k == PREFER_AVOID_PODS_ANNOTATION},
        taints=[
            Taint(t.get("key") or "", t.get("value") or "", t.get("effect") or "") for t in spec.get("taints") or []
        ],
        unschedulable=bool(spec.get("unschedulable")),
        conditions={c.get("type", ""): c.get("status", "") for c in status.get("conditions") or []},
        allocatable={k: resource_amount(k, v) for k, v in (status.get("allocatable") or {}).items()},
        images=images,
    )


def pdb_info(pdb: Mapping[str, Any]) -> PDBInfo:
    """A policy/v1 PodDisruptionBudget's selector and remaining disruptions."""
    meta = pdb.get("metadata") or {}
    return PDBInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        selector=dict((pdb.get("spec") or {}).get("selector") or {}),
        disruptions_allowed=int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def podgroup_info(group: Mapping[str, Any]) -> PodGroupInfo:
    """A scheduler-plugins PodGroup's quorum and timeout."""
    meta = group.get("metadata") or {}
    spec = group.get("spec") or {}
    timeout = spec.get("scheduleTimeoutSeconds")
    return PodGroupInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        min_member=int(spec.get("minMember") or 0),
        creation_timestamp=meta.get("creationTimestamp") or "",
        schedule_timeout_seconds=int(timeout) if timeout is not None else None,
        uid=meta.get("uid") or "",
    )
