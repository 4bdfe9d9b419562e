"""The table of watched kinds: one row a kind, read by the watcher, the store, the Lua scripts,
every replica's cache and the snapshot.

A kind of object kept as records (``Kind``) needs its dataclass (``extenders.model``), its
converter (``extenders.sync.convert``), its codec (``extenders.sync.records``) and a row in
``KINDS``; nothing else names it. Nodes and pods are not records of that shape (a node's hash holds
its pods, a pod moves between nodes and the pending table), so they have rows of their own
(``NODES``, ``PODS``) that the watcher reads through the same ``Watched`` face.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from extenders.kube.client import PODGROUPS_PATH
from extenders.kube.meta import metadata, object_key
from extenders.sync.convert import (
    controller_info,
    namespace_info,
    node_facts,
    pdb_info,
    pod_info,
    podgroup_info,
    pvc_info,
    service_info,
)
from extenders.sync.ops import PENDING, Op
from extenders.sync.records import CONTROLLER, NAMESPACE, PDB, PODGROUP, PVC, SERVICE, RecordCodec

T = TypeVar("T")
ApiObject = Mapping[str, Any]

# Keys under the prefix that a kind's hash (or its ``z`` generation set) must not take.
_RESERVED = frozenset(
    [
        "gen",
        "nodes",
        "node",
        "noderv",
        "nodegone",
        "nodegonez",
        "podloc",
        "pending",
        "pendingz",
        "assumed",
        "refused",
        "refusedpod",
        "requeued",
        "retrygen",
        "retryat",
        "tombs",
        "floor",
        "synced",
        "epoch",
        "leader",
        "storeid",
        "server",
        "acks",
        "eq",
        "c",
        "classes",
    ]
)
_HASH_NAME = re.compile(r"(?!gang)[a-z]+")  # the gang bookkeeping's keys all start with "gang"


class Watched(Protocol):
    """What the watcher needs of a kind: where to list it, and how its objects become store writes."""

    @property
    def resource(self) -> str: ...  # the API's plural name, for logs, metrics and stats

    @property
    def path(self) -> str: ...

    @property
    def required(self) -> bool: ...  # the store is synced only once it is listed; else watched when readable

    @property
    def stored_hashes(self) -> tuple[str, ...]: ...  # the store hashes whose keys are its identities

    def key_of(self, obj: ApiObject) -> str: ...

    def from_api(self, obj: ApiObject) -> Op: ...  # raises on an object it cannot convert

    def gone(self, obj: ApiObject) -> Op: ...

    def vanished(self, keys: Collection[str], list_version: str) -> list[Op]: ...  # stored, not in a relist


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """A kind kept as one record a key in the hash ``P:<hash>`` (generations in ``P:<hash>z``,
    tombstones ``<hash>:<key>``), carried to every replica's ``Snapshot.objects[attr]``."""

    resource: str
    path: str
    hash: str
    attr: str
    codec: RecordCodec[T]
    convert: Callable[[ApiObject], T]
    cluster_scoped: bool = False
    required: bool = False

    def __post_init__(self) -> None:
        if not _HASH_NAME.fullmatch(self.hash) or self.hash in _RESERVED or f"{self.hash}z" in _RESERVED:
            raise ValueError(f"{self.resource}: hash name {self.hash!r} is not lowercase letters or is taken")

    @property
    def stored_hashes(self) -> tuple[str, ...]:
        return (self.hash,)

    def key(self, item: Any) -> str:
        """The record key of a model object: its name, or namespace/name."""
        return str(item.name) if self.cluster_scoped else f"{item.namespace}/{item.name}"

    def key_of(self, obj: ApiObject) -> str:
        return str(metadata(obj).get("name") or "") if self.cluster_scoped else object_key(obj)

    def identity(self, key: str) -> dict[str, str]:
        """The attributes a record leaves to its key."""
        if self.cluster_scoped:
            return {"name": key}
        namespace, _, name = key.partition("/")
        return {"namespace": namespace, "name": name}

    def decode(self, key: str, raw: bytes | str) -> T:
        return self.codec.loads(raw, **self.identity(key))

    def upsert(self, item: T) -> Op:
        return Op.put(self.hash, self.key(item), self.codec.dumps(item))

    def delete(self, key: str) -> Op:
        return Op.remove(self.hash, key)

    def from_api(self, obj: ApiObject) -> Op:
        return self.upsert(self.convert(obj))

    def gone(self, obj: ApiObject) -> Op:
        return self.delete(self.key_of(obj))

    def vanished(self, keys: Collection[str], list_version: str) -> list[Op]:
        return [self.delete(key) for key in keys]


@dataclass(frozen=True, slots=True)
class NodeKind:
    """Nodes: facts in their own hash beside the pods placed there; a delete leaves a marker."""

    resource: str = "nodes"
    path: str = "/api/v1/nodes"
    required: bool = True
    stored_hashes: tuple[str, ...] = ("noderv",)

    def key_of(self, obj: ApiObject) -> str:
        return str(metadata(obj).get("name") or "")

    def from_api(self, obj: ApiObject) -> Op:
        return Op.node(node_facts(obj))

    def gone(self, obj: ApiObject) -> Op:
        """The delete carries the object's last resourceVersion: a request-borne copy no newer stays out."""
        return Op.delete_node(self.key_of(obj), str(metadata(obj).get("resourceVersion") or ""))

    def vanished(self, keys: Collection[str], list_version: str) -> list[Op]:
        # A vanished node's last resourceVersion is unknown; the list's is at least as new.
        return [Op.delete_node(name, list_version) for name in keys]


@dataclass(frozen=True, slots=True)
class PodKind:
    """Pods: placed on a node's hash when bound or assumed, else in the pending table."""

    resource: str = "pods"
    path: str = "/api/v1/pods"
    required: bool = True
    stored_hashes: tuple[str, ...] = ("podloc", PENDING)

    def key_of(self, obj: ApiObject) -> str:
        return str(metadata(obj).get("uid") or "")

    def from_api(self, obj: ApiObject) -> Op:
        return Op.pod(pod_info(obj))

    def gone(self, obj: ApiObject) -> Op:
        return Op.delete_pod(self.key_of(obj))

    def vanished(self, keys: Collection[str], list_version: str) -> list[Op]:
        # A pod assumed by some replica is a reservation the list cannot judge.
        return [Op.delete_pod_unless_assumed(uid) for uid in keys]


NODES = NodeKind()
PODS = PodKind()

PDBS = Kind(
    resource="poddisruptionbudgets",
    path="/apis/policy/v1/poddisruptionbudgets",
    hash="pdb",
    attr="pdbs",
    codec=PDB,
    convert=pdb_info,
    required=True,
)
PODGROUPS = Kind(
    resource="podgroups", path=PODGROUPS_PATH, hash="podgroup", attr="podgroups", codec=PODGROUP, convert=podgroup_info
)
NAMESPACES = Kind(
    resource="namespaces",
    path="/api/v1/namespaces",
    hash="ns",
    attr="namespaces",
    codec=NAMESPACE,
    convert=namespace_info,
    cluster_scoped=True,
)
PVCS = Kind(
    resource="persistentvolumeclaims",
    path="/api/v1/persistentvolumeclaims",
    hash="pvc",
    attr="pvcs",
    codec=PVC,
    convert=pvc_info,
)
# What the spreading scorers' default selector is made of (Services and controllers): selectors only.
SERVICES = Kind(
    resource="services", path="/api/v1/services", hash="svc", attr="services", codec=SERVICE, convert=service_info
)
REPLICATION_CONTROLLERS = Kind(
    resource="replicationcontrollers",
    path="/api/v1/replicationcontrollers",
    hash="rc",
    attr="replication_controllers",
    codec=CONTROLLER,
    convert=controller_info,
)
REPLICA_SETS = Kind(
    resource="replicasets",
    path="/apis/apps/v1/replicasets",
    hash="rs",
    attr="replica_sets",
    codec=CONTROLLER,
    convert=controller_info,
)
STATEFUL_SETS = Kind(
    resource="statefulsets",
    path="/apis/apps/v1/statefulsets",
    hash="sts",
    attr="stateful_sets",
    codec=CONTROLLER,
    convert=controller_info,
)

# Every kind kept as records. Kinds not required are watched only while readable: scheduling does
# without them (PodGroups when no CRD is installed, the others when RBAC does not grant them).
KINDS: tuple[Kind[Any], ...] = (
    PDBS,
    PODGROUPS,
    NAMESPACES,
    PVCS,
    SERVICES,
    REPLICATION_CONTROLLERS,
    REPLICA_SETS,
    STATEFUL_SETS,
)
WATCHED: tuple[Watched, ...] = (NODES, PODS, *KINDS)
