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
    ControllerInfo,
    HostPort,
    NamespaceInfo,
    NodeFacts,
    Owner,
    PDBInfo,
    PodGroupInfo,
    PodInfo,
    PVCInfo,
    ServiceInfo,
    Taint,
)
from extenders.quantity import resource_amount
from extenders.resources import is_best_effort, pod_resources

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
# Volume sources that NoDiskConflict still checks; the others are dropped on ingest.
CONFLICT_VOLUME_KEYS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi", "persistentVolumeClaim")


def _host_ports(spec: Mapping[str, Any]) -> list[HostPort]:
    """Ports of the containers that run as long as the pod: regular ones and sidecars, not plain init containers."""
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    ports: list[HostPort] = []
    for container in [*sidecars, *(spec.get("containers") or [])]:
        for port in container.get("ports") or []:
            host_port = int(port.get("hostPort") or 0)
            if host_port <= 0:
                continue
            ports.append((port.get("protocol") or "TCP", port.get("hostIP") or WILDCARD_IP, host_port))
    return ports


def _images(spec: Mapping[str, Any]) -> tuple[list[str], int, int]:
    """The image of each init container, container and image volume, in that order, and how many of
    them are init containers' and image volumes': ImageLocality scores them all and scales its range
    by how many there are (which ones, by release). The API server requires every one of a pod's to
    be named, so an empty name (a hand-made pod) is left out."""
    init = [name for c in spec.get("initContainers") or [] if (name := c.get("image"))]
    main = [name for c in spec.get("containers") or [] if (name := c.get("image"))]
    volumes = [name for vol in spec.get("volumes") or [] if (name := (vol.get("image") or {}).get("reference"))]
    return [*init, *main, *volumes], len(init), len(volumes)


def native_group(spec: Mapping[str, Any]) -> str:
    """The native pod group the API server kept on the pod (its feature gate on), or ""."""
    group = (spec.get("schedulingGroup") or {}).get("podGroupName")
    if group:
        return str(group)
    ref = spec.get("workloadRef") or {}
    if ref.get("name"):
        parts = [ref["name"], ref.get("podGroup") or "", ref.get("podGroupReplicaKey") or ""]
        return "/".join(p for p in parts if p)
    return ""


def _controller(meta: Mapping[str, Any]) -> Owner | None:
    """The controlling owner reference, or the first one when none is marked (``Owner.controller``
    tells which): the default spreading selector reads only a controller, NodePreferAvoidPods either."""
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return Owner(
        kind=chosen.get("kind", ""),
        name=chosen.get("name", ""),
        uid=chosen.get("uid", ""),
        api_version=chosen.get("apiVersion") or "",
        controller=chosen.get("controller") is True,
    )


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """A v1.Pod's scheduling view. Raises ValueError on bad quantities."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    images, init_images, volume_images = _images(spec)
    volumes = [
        {k: v for k, v in vol.items() if k in CONFLICT_VOLUME_KEYS or k == "name"}
        for vol in spec.get("volumes") or []
        if any(k in vol for k in CONFLICT_VOLUME_KEYS)
    ]
    resources = pod_resources(spec, status)
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
        requests=resources.requests,
        nonzero_cpu=resources.nonzero_cpu,
        nonzero_memory=resources.nonzero_memory,
        score_nonzero=resources.score_nonzero,
        best_effort=is_best_effort(spec),
        host_ports=_host_ports(spec),
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=dict(spec.get("affinity") or {}),
        tolerations=list(spec.get("tolerations") or []),
        topology_spread=list(spec.get("topologySpreadConstraints") or []),
        volumes=volumes,
        images=images,
        init_images=init_images,
        volume_images=volume_images,
        native_group=native_group(spec),
        deletion_timestamp=meta.get("deletionTimestamp"),
        creation_timestamp=meta.get("creationTimestamp"),
        start_time=status.get("startTime"),
        owner=_controller(meta),
        # A bound pod's nomination is history: dropped, so clearing it does not rewrite the node's record.
        nominated_node_name="" if spec.get("nodeName") else status.get("nominatedNodeName") or "",
        scheduling_gates=[] if spec.get("nodeName") else _gate_names(spec),
    )


def _gate_names(spec: Mapping[str, Any]) -> list[str]:
    gates = spec.get("schedulingGates") or []
    return [g["name"] for g in gates if isinstance(g, Mapping) and isinstance(g.get("name"), str)]


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    """A v1.Node's scheduling view. Raises ValueError on bad quantities."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    images: dict[str, int] = {}
    for image in status.get("images") or []:
        for name in image.get("names") or []:
            # A name listed twice keeps its first size, as kube-scheduler's image states do.
            images.setdefault(name, int(image.get("sizeBytes") or 0))
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
    status = pdb.get("status") or {}
    return PDBInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        selector=dict((pdb.get("spec") or {}).get("selector") or {}),
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
        disrupted_pods=frozenset(status.get("disruptedPods") or {}),
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


def namespace_info(namespace: Mapping[str, Any]) -> NamespaceInfo:
    """A v1.Namespace's labels (what namespaceSelectors match)."""
    meta = namespace.get("metadata") or {}
    return NamespaceInfo(name=meta.get("name") or "", labels=dict(meta.get("labels") or {}))


def pvc_info(claim: Mapping[str, Any]) -> PVCInfo:
    """A v1.PersistentVolumeClaim reduced to whether its access modes include ReadWriteOncePod."""
    meta = claim.get("metadata") or {}
    modes = (claim.get("spec") or {}).get("accessModes") or []
    return PVCInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        read_write_once_pod=READ_WRITE_ONCE_POD in modes,
    )


def service_info(service: Mapping[str, Any]) -> ServiceInfo:
    """A v1.Service reduced to its selector map (empty when it selects nothing)."""
    meta = service.get("metadata") or {}
    return ServiceInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        selector=dict((service.get("spec") or {}).get("selector") or {}),
    )


def controller_info(controller: Mapping[str, Any]) -> ControllerInfo:
    """A ReplicationController (selector map), ReplicaSet or StatefulSet (LabelSelector) reduced to
    its ``spec.selector``, as the object holds it."""
    meta = controller.get("metadata") or {}
    selector = (controller.get("spec") or {}).get("selector")
    return ControllerInfo(
        namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
        name=meta.get("name") or "",
        selector=dict(selector) if selector is not None else None,
    )
