"""How the scheduling view is stored in Redis: one table per type names each record key once.

Records are compact JSON objects. A field equal to its default is left out, so most pod
records carry a handful of keys; decoding passes only the keys present and lets the
dataclass fill in the rest. Lua scripts treat these records as opaque bytes.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import orjson

from extenders.model import (
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

T = TypeVar("T")
Convert = Callable[[Any], Any]

# The node hash field holding the NodeFacts record; pod records sit beside it under their uid,
# and fields starting with "_" are bookkeeping the snapshot does not read.
NODE_FIELD = "_node"


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    """One attribute stored under ``key``, converted on the way in and out when JSON cannot hold it."""

    key: str
    attr: str
    encode: Convert | None = None
    decode: Convert | None = None


_MISSING = object()


def _default_of(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _MISSING


class RecordCodec(Generic[T]):
    """Encodes a dataclass to a record and back by its column table."""

    def __init__(self, cls: type[T], columns: Iterable[Column], share_empty: bool = False) -> None:
        """``share_empty``: absent dict and list attributes of decoded objects all get one empty instance
        per attribute instead of a new one each (decoded objects are read-only)."""
        self.cls = cls
        self.columns = tuple(columns)
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = [c.attr for c in self.columns if c.attr not in fields]
        if unknown:
            raise TypeError(f"{cls.__name__} has no attribute(s) {unknown}")
        self._by_key = {c.key: c for c in self.columns}
        # (attr, key, encode, default); a required attribute's default is _MISSING: always written.
        self._plan = tuple((c.attr, c.key, c.encode, _default_of(fields[c.attr])) for c in self.columns)
        self._empties: dict[str, Any] = {}
        if share_empty:
            for c in self.columns:
                factory = fields[c.attr].default_factory
                if factory is dict or factory is list:
                    self._empties[c.attr] = factory()

    def encode(self, obj: T) -> dict[str, Any]:
        record: dict[str, Any] = {}
        for attr, key, convert, default in self._plan:
            value = getattr(obj, attr)
            if default is not _MISSING and value == default:
                continue
            record[key] = convert(value) if convert is not None else value
        return record

    def decode(self, record: Mapping[str, Any], **extra: Any) -> T:
        """``extra``: attributes kept outside the record (a hash key, a separately stored version)."""
        values = dict(extra)
        by_key = self._by_key
        for key, value in record.items():
            column = by_key.get(key)
            if column is not None:
                values[column.attr] = column.decode(value) if column.decode is not None else value
        for attr, empty in self._empties.items():
            values.setdefault(attr, empty)
        return self.cls(**values)

    def dumps(self, obj: T) -> bytes:
        return orjson.dumps(self.encode(obj))

    def loads(self, raw: bytes | str, **extra: Any) -> T:
        return self.decode(orjson.loads(raw), **extra)


# Pod records repeat the same few namespaces, node names, label pairs and images across 100k pods:
# one string object each instead of one per record.
_intern = sys.intern


def _interned_map(values: Mapping[str, str]) -> dict[str, str]:
    return {_intern(k): _intern(v) for k, v in values.items()}


def _interned_list(values: Iterable[str]) -> list[str]:
    return [_intern(v) for v in values]


def _ports_out(ports: list[HostPort]) -> list[list[Any]]:
    return [list(p) for p in ports]


def _ports_in(rows: list[list[Any]]) -> list[HostPort]:
    return [(p[0], p[1], int(p[2])) for p in rows]


def _owner_out(owner: Owner | None) -> list[Any] | None:
    """The owner as a short list: records are stored for every pod, so defaults are left off."""
    if owner is None:
        return None
    row: list[Any] = [owner.kind, owner.name, owner.uid]
    # [kind, name, uid] alone for an owner with no apiVersion that is not the controller (the defaults).
    if owner.api_version or owner.controller:
        row += [owner.api_version, 1 if owner.controller else 0]
    return row


def _owner_in(row: list[Any] | None) -> Owner | None:
    """The owner ``_owner_out`` wrote, in either of its two forms."""
    if not row:
        return None
    kind, name, uid = _intern(row[0]), _intern(row[1]), _intern(row[2])
    if len(row) < 5:  # the short form: no apiVersion, not the controller
        return Owner(kind, name, uid)
    return Owner(kind, name, uid, _intern(row[3]), bool(row[4]))


def _taints_out(taints: list[Taint]) -> list[list[str]]:
    return [[t.key, t.value, t.effect] for t in taints]


def _taints_in(rows: list[list[str]]) -> list[Taint]:
    return [Taint(t[0], t[1], t[2]) for t in rows]


def _names_out(names: frozenset[str]) -> list[str]:
    """Sorted, so an unchanged set always encodes to the same bytes (unchanged records are not rewritten)."""
    return sorted(names)


POD = RecordCodec(
    PodInfo,
    [
        Column("ns", "namespace", None, _intern),
        Column("n", "name"),
        Column("u", "uid"),
        Column("l", "labels", None, _interned_map),
        Column("a", "annotations", None, _interned_map),
        Column("node", "node_name", None, _intern),
        Column("ph", "phase", None, _intern),
        Column("pr", "priority"),
        Column("pp", "preemption_policy", None, _intern),
        Column("sn", "scheduler_name", None, _intern),
        Column("r", "requests"),
        Column("nzc", "nonzero_cpu"),
        Column("nzm", "nonzero_memory"),
        Column("snz", "score_nonzero", list, tuple),
        Column("be", "best_effort"),
        Column("hp", "host_ports", _ports_out, _ports_in),
        Column("ns_sel", "node_selector", None, _interned_map),
        Column("aff", "affinity"),
        Column("tol", "tolerations"),
        Column("tsc", "topology_spread"),
        Column("vol", "volumes"),
        Column("img", "images", None, _interned_list),
        Column("iimg", "init_images"),
        Column("vimg", "volume_images"),
        Column("ng", "native_group", None, _intern),
        Column("del", "deletion_timestamp"),
        Column("ct", "creation_timestamp", None, _intern),
        Column("st", "start_time", None, _intern),
        Column("own", "owner", _owner_out, _owner_in),
        Column("as", "assumed"),
        Column("nom", "nominated_node_name", None, _intern),
        Column("sg", "scheduling_gates", None, _interned_list),
    ],
    share_empty=True,
)

# The resourceVersion is stored beside the hash (P:noderv), so a heartbeat does not rewrite the record.
NODE = RecordCodec(
    NodeFacts,
    [
        Column("name", "name"),
        Column("uid", "uid"),
        Column("labels", "labels"),
        Column("ann", "annotations"),
        Column("taints", "taints", _taints_out, _taints_in),
        Column("unsched", "unschedulable"),
        Column("cond", "conditions"),
        Column("alloc", "allocatable"),
        Column("img", "images"),
    ],
)

# The kinds' records leave namespace and name to their key (``extenders.sync.kinds.Kind.decode``).
PDB = RecordCodec(
    PDBInfo,
    [
        Column("sel", "selector"),
        Column("da", "disruptions_allowed"),
        Column("rv", "resource_version"),
        Column("dp", "disrupted_pods", _names_out, frozenset),
    ],
)

PODGROUP = RecordCodec(
    PodGroupInfo,
    [
        Column("minMember", "min_member"),
        Column("creationTimestamp", "creation_timestamp"),
        Column("scheduleTimeoutSeconds", "schedule_timeout_seconds"),
        Column("uid", "uid"),
    ],
)
NAMESPACE = RecordCodec(NamespaceInfo, [Column("l", "labels")])
PVC = RecordCodec(PVCInfo, [Column("rwop", "read_write_once_pod")])
# One codec for Services (a selector map) and one for ReplicationControllers, ReplicaSets and
# StatefulSets (each in a hash of its own): only the selector, as a cluster may hold many old ReplicaSets.
SERVICE = RecordCodec(ServiceInfo, [Column("s", "selector")])
CONTROLLER = RecordCodec(ControllerInfo, [Column("s", "selector")])


def reserved_pod(pod: PodInfo, node: str) -> bytes:
    """The record of ``pod`` assumed on ``node``: what a reservation writes before the watch confirms it."""
    return POD.dumps(dataclasses.replace(pod, node_name=node, assumed=True, nominated_node_name=""))


PodDecoder = Callable[[str, bytes], PodInfo]


def decode_node_hash(
    fields: Mapping[str, bytes], resource_version: str, decode_pod: PodDecoder | None = None
) -> tuple[NodeFacts | None, dict[str, PodInfo]]:
    """A node's Redis hash as (facts, pods by uid); ``decode_pod(uid, raw)`` may reuse earlier decodes."""
    facts: NodeFacts | None = None
    pods: dict[str, PodInfo] = {}
    for key, raw in fields.items():
        if key == NODE_FIELD:
            facts = NODE.loads(raw, resource_version=resource_version)
        elif not key.startswith("_"):
            pods[key] = decode_pod(key, raw) if decode_pod is not None else POD.loads(raw)
    return facts, pods
