"""The watcher's writes: one ``Op`` each, a batch applied atomically by ``apply.lua``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from extenders.model import NodeFacts, PodInfo
from extenders.sync.records import NODE, POD

# The record hash of unbound, non-terminal pods (``P:pending``), caught up like a kind's records.
PENDING = "pending"


@dataclass(slots=True, frozen=True)
class Op:
    """One write: ``code`` is the op letter ``apply.lua`` dispatches on."""

    code: str
    id: str
    arg: str = ""
    payload: bytes | str = b""

    @classmethod
    def put(cls, hash_name: str, key: str, record: bytes) -> Op:
        """Upsert a kind's record (``extenders.sync.kinds.Kind.upsert`` builds it)."""
        return cls("I", key, hash_name, record)

    @classmethod
    def remove(cls, hash_name: str, key: str) -> Op:
        return cls("i", key, hash_name)

    @classmethod
    def node(cls, facts: NodeFacts) -> Op:
        return cls("N", facts.name, facts.resource_version, NODE.dumps(facts))

    @classmethod
    def delete_node(cls, name: str, resource_version: str = "") -> Op:
        """``resource_version``: the deleted object's last one (or the list's, for a relist's delete)."""
        return cls("n", name, resource_version)

    @classmethod
    def pod(cls, pod: PodInfo) -> Op:
        """Add, confirm (clears ``assumed``), update or move a pod; terminal pods are removed."""
        if pod.terminal:
            return cls.delete_pod(pod.uid)
        stored = replace(pod, assumed=False) if pod.assumed else pod
        return cls("P", pod.uid, pod.node_name, POD.dumps(stored))

    @classmethod
    def delete_pod(cls, uid: str) -> Op:
        return cls("p", uid)

    @classmethod
    def delete_pod_unless_assumed(cls, uid: str) -> Op:
        """A relist's delete: a pod assumed by some replica is a reservation the list cannot judge."""
        return cls("q", uid)

    @classmethod
    def synced(cls, marker: str) -> Op:
        return cls("S", "", "", marker)
