"""The resource types the fake serves: where they live in the URL space and how they behave."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    plural: str
    group: str  # "" for the core group
    version: str
    kind: str
    namespaced: bool
    builtin: bool  # built-in list items carry no apiVersion/kind; custom resources' items do
    field_labels: frozenset[str]  # what fieldSelector accepts (anything else: 400 like the real server)
    has_generation: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """URL prefix of the group/version: /api/v1 or /apis/<group>/<version>."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


_META = frozenset({"metadata.name", "metadata.namespace"})

NODES = ResourceType("nodes", "", "v1", "Node", False, True, _META | {"spec.unschedulable"})
PODS = ResourceType(
    "pods",
    "",
    "v1",
    "Pod",
    True,
    True,
    _META
    | {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
)
PDBS = ResourceType("poddisruptionbudgets", "policy", "v1", "PodDisruptionBudget", True, True, _META, True)
PODGROUPS = ResourceType("podgroups", "scheduling.x-k8s.io", "v1alpha1", "PodGroup", True, False, _META, True)
NAMESPACES = ResourceType("namespaces", "", "v1", "Namespace", False, True, _META | {"status.phase"})
PVCS = ResourceType("persistentvolumeclaims", "", "v1", "PersistentVolumeClaim", True, True, _META)
SERVICES = ResourceType("services", "", "v1", "Service", True, True, _META)
REPLICATION_CONTROLLERS = ResourceType(
    "replicationcontrollers", "", "v1", "ReplicationController", True, True, _META | {"status.replicas"}, True
)
REPLICA_SETS = ResourceType("replicasets", "apps", "v1", "ReplicaSet", True, True, _META | {"status.replicas"}, True)
STATEFUL_SETS = ResourceType("statefulsets", "apps", "v1", "StatefulSet", True, True, _META, True)
# Not watched by the extender: the kind a test adds through the kinds table.
CONFIG_MAPS = ResourceType("configmaps", "", "v1", "ConfigMap", True, True, _META)

ALL: tuple[ResourceType, ...] = (
    NODES,
    PODS,
    PDBS,
    PODGROUPS,
    NAMESPACES,
    PVCS,
    SERVICES,
    REPLICATION_CONTROLLERS,
    REPLICA_SETS,
    STATEFUL_SETS,
    CONFIG_MAPS,
)
