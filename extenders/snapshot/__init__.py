"""The in-memory picture of the cluster a replica schedules against.

Each replica holds one ``Snapshot`` and refreshes it from Redis before answering; the
engine only ever reads it. ``generation`` is the cluster generation it reflects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extenders.model import NodeInfo, PDBInfo, PodGroupInfo, PodInfo
from extenders.snapshot.summary import ClusterSummary, summarise


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
    # A summary of an earlier table (the previous snapshot's) to derive this one's from. Only a
    # summary is kept, never a snapshot, so snapshots never chain each other alive.
    summary_seed: ClusterSummary | None = field(default=None, repr=False, compare=False)
    _summary: ClusterSummary | None = field(default=None, init=False, repr=False, compare=False)

    def summary(self) -> ClusterSummary:
        """The node table's summary (see extenders.snapshot.summary), the one way to reach it.

        A sealed snapshot computes it once; an unsealed one (tests, work copies edited in place)
        checks its table again on every call and patches what changed.
        """
        current = self._summary
        if current is not None and self.sealed:
            return current
        current = summarise(self.nodes.values(), current or self.summary_seed)
        self._summary = current
        self.summary_seed = None
        return current

    def seed(self) -> ClusterSummary | None:
        """What the next snapshot derives its summary from: this one's, or the one it would derive from."""
        return self._summary or self.summary_seed

    def node(self, name: str) -> NodeInfo | None:
        return self.nodes.get(name)

    def find_pod(self, uid: str) -> PodInfo | None:
        """A bound pod by uid, searching every node (for callers without the node name)."""
        for info in self.nodes.values():
            pod = info.pods.get(uid)
            if pod is not None:
                return pod
        return None
