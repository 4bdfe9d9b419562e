"""The scheduling view of pods and nodes: what kube-scheduler's NodeInfo aggregates.

Plain data: ``extenders.sync.convert`` builds it from Kubernetes objects and
``extenders.sync.records`` stores it in Redis.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from extenders.resources import PODS

DEFAULT_NAMESPACE = "default"
WILDCARD_IP = "0.0.0.0"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# Annotation read by the NodePreferAvoidPods priority; the only node annotation we keep.
PREFER_AVOID_PODS_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"  # the API's default preemptionPolicy

HostPort = tuple[str, str, int]  # (protocol, host ip, port)
LabelKey = str  # label_key(namespace, label key, label value)


def label_key(namespace: str, key: str, value: str) -> LabelKey:
    """The ``NodeInfo.pods_by_label`` key of one pod label.

    A string rather than a tuple: strings cache their hash, so probing thousands of nodes
    with one key hashes it once; interned, as thousands of pods share each. NUL cannot occur in
    namespaces or labels.
    """
    return sys.intern(f"{namespace}\x00{key}\x00{value}")


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True, frozen=True)
class Owner:
    """The pod's controlling owner reference, or its first one when none is marked as controller."""

    kind: str
    name: str
    uid: str
    api_version: str = ""
    controller: bool = False  # the reference says ``controller: true``


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
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    scheduler_name: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    # (millicpu, memory) NodeResourcesFit's scorer counts for this pod as the one being scheduled
    # (its containers' spec, defaults filled in, pod-level requests ignored), when it differs from the
    # non-zero pair above; None otherwise (extenders.resources.fit_score_requests).
    score_nonzero: tuple[int, int] | None = None
    best_effort: bool = False
    host_ports: list[HostPort] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    topology_spread: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    init_images: int = 0  # how many of ``images``, the first ones, are init containers'
    volume_images: int = 0  # how many of ``images``, the last ones, are image volumes'
    # The native pod group the pod belongs to (1.36+ spec.schedulingGroup.podGroupName, 1.35
    # spec.workloadRef as "workload/podGroup[/replicaKey]"): kube-scheduler's own gang plug-in's to hold.
    native_group: str = ""
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None
    start_time: str | None = None
    owner: Owner | None = None
    assumed: bool = False
    # status.nominatedNodeName of an unbound pod (kept only while unbound): where a preemption made
    # room for it, which kube-scheduler's filter counts as taken for pods of no higher priority.
    nominated_node_name: str = ""
    # spec.schedulingGates' names (an unbound pod's): kube-scheduler leaves the pod alone until they
    # are gone. The gang assembly gate is one the watch leader removes (extenders.gang.gates).
    scheduling_gates: list[str] = field(default_factory=list)

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


_stamp = count(1).__next__  # NodeInfo.version: atomic under the GIL


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
    # The index for selector matching (see extenders.snapshot.pod_query): the node's pods by
    # label_key(namespace, label key, label value). Lists, as a node holds few pods; terminating
    # pods are included (callers decide).
    pods_by_label: dict[LabelKey, list[PodInfo]] = field(default_factory=dict, compare=False, repr=False)
    # A stamp no other NodeInfo state of this process shares, renewed by every add_pod/remove_pod:
    # snapshot-wide summaries notice in-place changes by it, and the equivalence cache remembers a
    # node's state by it without keeping the node alive.
    version: int = field(default_factory=_stamp, compare=False)
    # Scratch space for data predicates derive from this node's pods (e.g. compiled terms),
    # filled lazily by them and emptied by add_pod/remove_pod. Not part of any record.
    derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

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
        self.version = _stamp()
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

    def remove_pod(self, uid: str) -> PodInfo | None:
        pod = self.pods.pop(uid, None)
        if pod is None:
            return None
        self.version = _stamp()
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
    # Names in status.disruptedPods: evictions the API server has admitted but the disruption
    # controller has not yet seen go, already taken out of ``disruptions_allowed``.
    disrupted_pods: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class NamespaceInfo:
    """A Namespace's labels: what an affinity term's namespaceSelector is matched against."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class PVCInfo:
    """A PersistentVolumeClaim as scheduling reads it: only whether one pod at most may use it."""

    namespace: str
    name: str
    read_write_once_pod: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class ServiceInfo:
    """A Service reduced to its ``spec.selector`` map (empty when it has none): which pods it
    groups, for the spreading scorers' default selector."""

    namespace: str
    name: str
    selector: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class ControllerInfo:
    """A ReplicationController, ReplicaSet or StatefulSet reduced to its ``spec.selector``: a
    ``key: value`` map for a ReplicationController, a metav1.LabelSelector (JSON) for the others;
    None when the object has none. Nothing else of these (possibly numerous) objects is kept."""

    namespace: str
    name: str
    selector: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class PodGroupInfo:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1): the gang's declared quorum."""

    namespace: str
    name: str
    min_member: int = 0
    creation_timestamp: str = ""
    schedule_timeout_seconds: int | None = None
    uid: str = ""  # for Events about the group

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
