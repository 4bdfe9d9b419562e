"""The scheduling view of pods and nodes: what kube-scheduler's NodeInfo aggregates.

Objects from the Kubernetes API are reduced once, on ingest, to the fields scheduling
reads, so the predicates never walk a full v1.Pod. Records round-trip through plain
dicts (``to_record``/``from_record``) for storage in Redis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extenders.quantity import resource_amount
from extenders.resources import PODS, is_best_effort, pod_nonzero_requests, pod_requests

DEFAULT_NAMESPACE = "default"
WILDCARD_IP = "0.0.0.0"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# Annotation read by the NodePreferAvoidPods priority; the only node annotation we keep.
PREFER_AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
# Volume sources that NoDiskConflict still checks.
_CONFLICT_VOLUME_KEYS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi", "persistentVolumeClaim")

HostPort = tuple[str, str, int]  # (protocol, host ip, port)
LabelKey = str  # label_key(namespace, label key, label value)


def label_key(namespace: str, key: str, value: str) -> LabelKey:
    """The ``NodeInfo.pods_by_label`` key of one pod label.

    A string rather than a tuple: strings cache their hash, so probing thousands of nodes
    with one key hashes it once. NUL cannot occur in namespaces or labels.
    """
    return f"{namespace}\x00{key}\x00{value}"


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True, frozen=True)
class Owner:
    kind: str
    name: str
    uid: str


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
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return Owner(kind=chosen.get("kind", ""), name=chosen.get("name", ""), uid=chosen.get("uid", ""))


@dataclass(slots=True)
class PodInfo:
    """A pod as scheduling sees it: identity, placement, requests and constraints."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_name: str = ""
    phase: str = ""
    priority: int = 0
    preemption_policy: str = "PreemptLowerPriority"
    scheduler_name: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    best_effort: bool = False
    host_ports: list[HostPort] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    topology_spread: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None
    start_time: str | None = None
    owner: Owner | None = None
    assumed: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def has_pod_affinity(self) -> bool:
        return bool(self.affinity.get("podAffinity") or self.affinity.get("podAntiAffinity"))

    def has_required_anti_affinity(self) -> bool:
        anti = self.affinity.get("podAntiAffinity") or {}
        return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    @classmethod
    def from_k8s(cls, pod: Mapping[str, Any]) -> PodInfo:
        """Reduce a v1.Pod (as JSON) to its scheduling view. Raises ValueError on bad quantities."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        images = [c.get("image", "") for c in spec.get("containers") or [] if c.get("image")]
        volumes = [
            {k: v for k, v in vol.items() if k in _CONFLICT_VOLUME_KEYS or k == "name"}
            for vol in spec.get("volumes") or []
            if any(k in vol for k in _CONFLICT_VOLUME_KEYS)
        ]
        nonzero_cpu, nonzero_memory = pod_nonzero_requests(spec)
        return cls(
            namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            node_name=spec.get("nodeName") or "",
            phase=status.get("phase") or "",
            priority=int(spec.get("priority") or 0),
            preemption_policy=spec.get("preemptionPolicy") or "PreemptLowerPriority",
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

    def to_record(self) -> dict[str, Any]:
        """A compact dict for storage; empty fields are left out."""
        rec: dict[str, Any] = {"ns": self.namespace, "n": self.name, "u": self.uid}
        optional: dict[str, Any] = {
            "l": self.labels,
            "a": self.annotations,
            "node": self.node_name,
            "ph": self.phase,
            "pr": self.priority,
            "pp": self.preemption_policy if self.preemption_policy != "PreemptLowerPriority" else "",
            "sn": self.scheduler_name,
            "r": self.requests,
            "nzc": self.nonzero_cpu,
            "nzm": self.nonzero_memory,
            "be": self.best_effort,
            "hp": [list(p) for p in self.host_ports],
            "ns_sel": self.node_selector,
            "aff": self.affinity,
            "tol": self.tolerations,
            "tsc": self.topology_spread,
            "vol": self.volumes,
            "img": self.images,
            "del": self.deletion_timestamp,
            "ct": self.creation_timestamp,
            "st": self.start_time,
            "own": [self.owner.kind, self.owner.name, self.owner.uid] if self.owner else None,
            "as": self.assumed,
        }
        for k, v in optional.items():
            if v:
                rec[k] = v
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> PodInfo:
        own = rec.get("own")
        return cls(
            namespace=rec["ns"],
            name=rec["n"],
            uid=rec["u"],
            labels=rec.get("l") or {},
            annotations=rec.get("a") or {},
            node_name=rec.get("node") or "",
            phase=rec.get("ph") or "",
            priority=rec.get("pr") or 0,
            preemption_policy=rec.get("pp") or "PreemptLowerPriority",
            scheduler_name=rec.get("sn") or "",
            requests=rec.get("r") or {},
            nonzero_cpu=rec.get("nzc") or 0,
            nonzero_memory=rec.get("nzm") or 0,
            best_effort=bool(rec.get("be")),
            host_ports=[(p[0], p[1], int(p[2])) for p in rec.get("hp") or []],
            node_selector=rec.get("ns_sel") or {},
            affinity=rec.get("aff") or {},
            tolerations=rec.get("tol") or [],
            topology_spread=rec.get("tsc") or [],
            volumes=rec.get("vol") or [],
            images=rec.get("img") or [],
            deletion_timestamp=rec.get("del"),
            creation_timestamp=rec.get("ct"),
            start_time=rec.get("st"),
            owner=Owner(own[0], own[1], own[2]) if own else None,
            assumed=bool(rec.get("as")),
        )


@dataclass(slots=True)
class NodeFacts:
    """What the node object itself says: labels, taints, conditions, capacity, images."""

    name: str
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    unschedulable: bool = False
    conditions: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    images: dict[str, int] = field(default_factory=dict)  # every image name -> size in bytes

    @classmethod
    def from_k8s(cls, node: Mapping[str, Any]) -> NodeFacts:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        images: dict[str, int] = {}
        for image in status.get("images") or []:
            for name in image.get("names") or []:
                images[name] = int(image.get("sizeBytes") or 0)
        annotations = meta.get("annotations") or {}
        return cls(
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

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "uid": self.uid,
            "rv": self.resource_version,
            "labels": self.labels,
            "ann": self.annotations,
            "taints": [[t.key, t.value, t.effect] for t in self.taints],
            "unsched": self.unschedulable,
            "cond": self.conditions,
            "alloc": self.allocatable,
            "img": self.images,
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> NodeFacts:
        return cls(
            name=rec["name"],
            uid=rec.get("uid", ""),
            resource_version=rec.get("rv", ""),
            labels=rec.get("labels") or {},
            annotations=rec.get("ann") or {},
            taints=[Taint(t[0], t[1], t[2]) for t in rec.get("taints") or []],
            unschedulable=bool(rec.get("unsched")),
            conditions=rec.get("cond") or {},
            allocatable=rec.get("alloc") or {},
            images=rec.get("img") or {},
        )


def _drop_from(index: dict[Any, list[PodInfo]], key: Any, pod: PodInfo) -> None:
    """Remove ``pod`` (by identity) from one index bucket, dropping the bucket when it empties."""
    bucket = index.get(key)
    if bucket is None:
        return
    kept = [p for p in bucket if p is not pod]
    if kept:
        index[key] = kept
    else:
        del index[key]


@dataclass(slots=True)
class NodeInfo:
    """A node and the pods placed on it, with the aggregates the predicates read.

    ``node`` is None when pods name a node the snapshot has no object for (yet); such a
    node is never a valid target.
    """

    name: str
    node: NodeFacts | None = None
    generation: int = 0
    pods: dict[str, PodInfo] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    used_ports: set[HostPort] = field(default_factory=set)
    pods_with_affinity: list[PodInfo] = field(default_factory=list)
    pods_with_required_anti_affinity: list[PodInfo] = field(default_factory=list)
    # Indexes for selector matching (see extenders.snapshot.pod_query): the node's pods by
    # label_key(namespace, label key, label value), and by controller owner uid. Lists, as a node
    # holds few pods; terminating pods are included (callers decide).
    pods_by_label: dict[LabelKey, list[PodInfo]] = field(default_factory=dict, compare=False, repr=False)
    pods_by_owner: dict[str, list[PodInfo]] = field(default_factory=dict, compare=False, repr=False)
    # Bumped by every add_pod/remove_pod, so snapshot-wide summaries notice in-place changes.
    version: int = field(default=0, compare=False)
    # Scratch space for data predicates derive from this node's pods (e.g. compiled terms),
    # filled lazily by them and emptied by add_pod/remove_pod. Not part of any record.
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, name: str, node: NodeFacts | None, pods: Iterable[PodInfo], generation: int = 0) -> NodeInfo:
        info = cls(name=name, node=node, generation=generation)
        for pod in pods:
            info.add_pod(pod)
        return info

    @property
    def allocatable(self) -> dict[str, int]:
        return self.node.allocatable if self.node else {}

    @property
    def labels(self) -> dict[str, str]:
        return self.node.labels if self.node else {}

    def add_pod(self, pod: PodInfo) -> None:
        """Account for a pod; a pod already present is replaced."""
        if pod.uid in self.pods:
            self.remove_pod(pod.uid)
        self.version += 1
        self.derived.clear()
        self.pods[pod.uid] = pod
        requested = self.requested
        for name, amount in pod.requests.items():
            requested[name] = requested.get(name, 0) + amount
        self.nonzero_cpu += pod.nonzero_cpu
        self.nonzero_memory += pod.nonzero_memory
        self.used_ports.update(pod.host_ports)
        if pod.has_pod_affinity():
            self.pods_with_affinity.append(pod)
        if pod.has_required_anti_affinity():
            self.pods_with_required_anti_affinity.append(pod)
        by_label = self.pods_by_label
        namespace = pod.namespace
        for key, value in pod.labels.items():
            index_key = label_key(namespace, key, value)
            bucket = by_label.get(index_key)
            if bucket is None:
                by_label[index_key] = [pod]
            else:
                bucket.append(pod)
        if pod.owner is not None:
            self.pods_by_owner.setdefault(pod.owner.uid, []).append(pod)

    def remove_pod(self, uid: str) -> PodInfo | None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        self.version += 1
        self.derived.clear()
        requested = self.requested
        for name, amount in pod.requests.items():
            left = requested.get(name, 0) - amount
            if left:
                requested[name] = left
            else:
                requested.pop(name, None)
        self.nonzero_cpu -= pod.nonzero_cpu
        self.nonzero_memory -= pod.nonzero_memory
        # Several pods may use the same port tuple only if one is terminating; rebuild to be exact.
        self.used_ports = {p for other in self.pods.values() for p in other.host_ports}
        self.pods_with_affinity = [p for p in self.pods_with_affinity if p.uid != uid]
        self.pods_with_required_anti_affinity = [p for p in self.pods_with_required_anti_affinity if p.uid != uid]
        namespace = pod.namespace
        for key, value in pod.labels.items():
            _drop_from(self.pods_by_label, label_key(namespace, key, value), pod)
        if pod.owner is not None:
            _drop_from(self.pods_by_owner, pod.owner.uid, pod)
        return pod

    def requested_with_pods(self) -> dict[str, int]:
        """Requested totals including the pod count, as operators read them."""
        out = dict(self.requested)
        out[PODS] = len(self.pods)
        return out


@dataclass(slots=True)
class PDBInfo:
    """A policy/v1 PodDisruptionBudget: which pods it guards and how many may still go."""

    namespace: str
    name: str
    selector: dict[str, Any] = field(default_factory=dict)  # a metav1.LabelSelector as JSON
    disruptions_allowed: int = 0
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_k8s(cls, pdb: Mapping[str, Any]) -> PDBInfo:
        meta = pdb.get("metadata") or {}
        return cls(
            namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
            name=meta.get("name") or "",
            selector=dict((pdb.get("spec") or {}).get("selector") or {}),
            disruptions_allowed=int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "ns": self.namespace,
            "n": self.name,
            "sel": self.selector,
            "da": self.disruptions_allowed,
            "rv": self.resource_version,
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> PDBInfo:
        return cls(rec["ns"], rec["n"], rec.get("sel") or {}, int(rec.get("da") or 0), rec.get("rv") or "")


@dataclass(slots=True)
class PodGroupInfo:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1): the gang's declared quorum."""

    namespace: str
    name: str
    min_member: int = 0
    creation_timestamp: str = ""
    schedule_timeout_seconds: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_k8s(cls, group: Mapping[str, Any]) -> PodGroupInfo:
        meta = group.get("metadata") or {}
        spec = group.get("spec") or {}
        timeout = spec.get("scheduleTimeoutSeconds")
        return cls(
            namespace=meta.get("namespace") or DEFAULT_NAMESPACE,
            name=meta.get("name") or "",
            min_member=int(spec.get("minMember") or 0),
            creation_timestamp=meta.get("creationTimestamp") or "",
            schedule_timeout_seconds=int(timeout) if timeout is not None else None,
        )

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"minMember": self.min_member, "creationTimestamp": self.creation_timestamp}
        if self.schedule_timeout_seconds is not None:
            rec["scheduleTimeoutSeconds"] = self.schedule_timeout_seconds
        return rec

    @classmethod
    def from_record(cls, key: str, rec: Mapping[str, Any]) -> PodGroupInfo:
        namespace, _, name = key.partition("/")
        timeout = rec.get("scheduleTimeoutSeconds")
        return cls(
            namespace=namespace,
            name=name,
            min_member=int(rec.get("minMember") or 0),
            creation_timestamp=rec.get("creationTimestamp") or "",
            schedule_timeout_seconds=int(timeout) if timeout is not None else None,
        )
