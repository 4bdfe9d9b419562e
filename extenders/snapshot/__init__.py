"""The in-memory picture of the cluster a replica schedules against.

Each replica holds one ``Snapshot`` and refreshes it from Redis before answering; the
engine only ever reads it. ``generation`` is the cluster generation it reflects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from extenders.model import (
    ControllerInfo,
    NamespaceInfo,
    NodeInfo,
    PDBInfo,
    PodGroupInfo,
    PodInfo,
    PVCInfo,
    ServiceInfo,
)
from extenders.snapshot.summary import ClusterSummary, Contribution, summarise

# Unbound pods by the node a preemption nominated them to (``status.nominatedNodeName``).
NominatedPods = Mapping[str, tuple[PodInfo, ...]]


def _nomination(pod: PodInfo | None) -> str:
    return pod.nominated_node_name if pod is not None and not pod.node_name else ""


def index_nominated(pending: Iterable[PodInfo]) -> dict[str, tuple[PodInfo, ...]]:
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pending:
        node = _nomination(pod)
        if node:
            by_node.setdefault(node, []).append(pod)
    return {name: tuple(pods) for name, pods in by_node.items()}


def patch_nominated(
    index: NominatedPods, before: Mapping[str, PodInfo], after: Mapping[str, PodInfo], changed: Iterable[str]
) -> NominatedPods:
    """``index`` (of ``before``) brought up to ``after`` by looking only at the ``changed`` pending uids."""
    out: dict[str, list[PodInfo]] | None = None
    for uid in changed:
        old, new = _nomination(before.get(uid)), _nomination(after.get(uid))
        if not old and not new:
            continue
        if out is None:
            out = {name: list(pods) for name, pods in index.items()}
        if old:
            out[old] = [p for p in out.get(old, ()) if p.uid != uid]
        if new:
            out.setdefault(new, []).append(after[uid])
    if out is None:
        return index
    return {name: tuple(pods) for name, pods in out.items() if pods}


_RESERVATIONS = "snapshot.reservations"  # ClusterSummary.tally key


def _reservations(info: NodeInfo) -> Contribution:
    return tuple((None, uid, uid) for uid, pod in info.pods.items() if pod.assumed)


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
    # By name. Empty when Namespaces are not watched (a cluster always has some): see
    # extenders.plugins.inter_pod_affinity.terms for what namespaceSelectors match then.
    namespaces: dict[str, NamespaceInfo] = field(default_factory=dict)
    pvcs: dict[str, PVCInfo] = field(default_factory=dict)  # PersistentVolumeClaims by namespace/name
    # By namespace/name, only their selectors: what the spreading scorers' default selector is made
    # of (extenders.plugins.helper.default_selector). Empty when not watched (RBAC).
    services: dict[str, ServiceInfo] = field(default_factory=dict)
    replication_controllers: dict[str, ControllerInfo] = field(default_factory=dict)
    replica_sets: dict[str, ControllerInfo] = field(default_factory=dict)
    stateful_sets: dict[str, ControllerInfo] = field(default_factory=dict)
    # The nominated-pod index of ``pending``, when known (the replica cache patches it forward).
    nominated_seed: NominatedPods | None = field(default=None, repr=False, compare=False)
    # Names of the nodes that differ from the table ``summary_seed`` summarises (None: not known), so a
    # sealed snapshot derives its summary looking at those nodes only.
    node_changes: frozenset[str] | None = field(default=None, repr=False, compare=False)

    def summary(self) -> ClusterSummary:
        """The node table's summary (see extenders.snapshot.summary), the one way to reach it.

        A sealed snapshot computes it once; an unsealed one (tests, work copies edited in place)
        checks its table again on every call and patches what changed.
        """
        current = self._summary
        if current is not None and self.sealed:
            return current
        derived: ClusterSummary | None = None
        seed, changes = self.summary_seed, self.node_changes
        if current is None and self.sealed and seed is not None and changes is not None:
            derived = seed.with_changes(self.nodes, changes)
        current = derived or summarise(self.nodes.values(), current or seed)
        self._summary = current
        self.summary_seed = None
        return current

    def nominated(self) -> NominatedPods:
        """Pending pods by their nominated node, which kube-scheduler's filter counts as already there.

        A sealed snapshot indexes its table once (most often handed the index by the replica
        cache, which patches the previous one); an unsealed one scans on every call.
        """
        if self.nominated_seed is not None and self.sealed:
            return self.nominated_seed
        index = index_nominated(self.pending.values())
        if self.sealed:
            self.nominated_seed = index
        return index

    def seed(self) -> ClusterSummary | None:
        """What the next snapshot derives its summary from: this one's, or the one it would derive from."""
        return self._summary or self.summary_seed

    def changes_since_seed(self, changed: Iterable[str]) -> frozenset[str] | None:
        """``node_changes`` for the next snapshot, whose table differs from this one's in ``changed``:
        relative to ``seed()`` (None when this snapshot does not know its own)."""
        if self._summary is not None:
            return frozenset(changed)
        if self.node_changes is None:
            return None
        return self.node_changes.union(changed)

    def node(self, name: str) -> NodeInfo | None:
        return self.nodes.get(name)

    def find_pod(self, uid: str) -> PodInfo | None:
        """A placed pod (bound or reserved) by uid, for callers without the node name.

        A pending pod can only be placed as a reservation, which the summary indexes; any other
        pod is searched for on every node.
        """
        if uid in self.pending:
            placed = self.find_reservation(uid)
            return None if placed is None else self.nodes[placed].pods.get(uid)
        for info in self.nodes.values():
            pod = info.pods.get(uid)
            if pod is not None:
                return pod
        return None

    def find_reservation(self, uid: str) -> str | None:
        """The node holding a reservation (an assumed pod) of ``uid``, from the summary's index."""
        tally = self.summary().tally(_RESERVATIONS, _reservations)
        if uid not in tally.owners:
            return None
        for name, part in tally.parts.items():
            if any(owner == uid for _group, _key, owner in part):
                return name
        return None
