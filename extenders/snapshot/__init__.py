"""The in-memory picture of the cluster a replica schedules against.

Each replica holds one ``Snapshot`` and refreshes it from Redis before answering; the
engine only ever reads it. ``generation`` is the cluster generation it reflects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extenders.model import NodeInfo, PDBInfo, PodGroupInfo, PodInfo


@dataclass(slots=True)
class Snapshot:
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    pending: dict[str, PodInfo] = field(default_factory=dict)  # unbound pods by uid
    pdbs: dict[str, PDBInfo] = field(default_factory=dict)  # by namespace/name
    generation: int = 0
    # Set by the replica cache on the snapshots it hands out: those are never changed in place
    # (a change makes a new Snapshot), so what is derived from one may be reused by identity.
    sealed: bool = False
    podgroups: dict[str, PodGroupInfo] = field(default_factory=dict)  # by namespace/name

    def node(self, name: str) -> NodeInfo | None:
        return self.nodes.get(name)

    def find_pod(self, uid: str) -> PodInfo | None:
        """A bound pod by uid, searching every node (for callers without the node name)."""
        for info in self.nodes.values():
            pod = info.pods.get(uid)
            if pod is not None:
                return pod
        return None
