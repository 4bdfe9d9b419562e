"""The replica's immutable picture of the cluster: nodes with their pods, pending pods and the
objects of every watched kind."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

from extenders.features import NEWEST, Features
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
from extenders.snapshot.nominated import NominatedPods, index_nominated
from extenders.snapshot.summary import ClusterSummary, summarise
from extenders.snapshot.tally import Contribution

_RESERVATIONS = "snapshot.reservations"  # ClusterSummary.tally key


def _reservations(info: NodeInfo) -> Contribution:
    return tuple((None, uid, uid) for uid, pod in info.pods.items() if pod.assumed)


_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclass(slots=True, weakref_slot=True)
class Snapshot:
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    pending: dict[str, PodInfo] = field(default_factory=dict)  # unbound pods by uid
    # Each watched kind's objects by key (name, or namespace/name), under the kind's ``attr`` (see
    # extenders.sync.kinds); a kind not watched (RBAC, no CRD) has none. Read through the typed
    # properties below.
    objects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    generation: int = 0
    # The kube-scheduler release whose plug-in behaviour to follow (the cluster's, see extenders.features).
    features: Features = NEWEST
    # Set by the replica cache on the snapshots it hands out: those are never changed in place
    # (a change makes a new Snapshot), so what is derived from one may be reused by identity.
    sealed: bool = False
    # A summary of an earlier table (the previous snapshot's) to derive this one's from. Only a
    # summary is kept, never a snapshot, so snapshots never chain each other alive.
    summary_seed: ClusterSummary | None = field(default=None, repr=False, compare=False)
    _summary: ClusterSummary | None = field(default=None, init=False, repr=False, compare=False)
    # The nominated-pod index of ``pending``, when known (the replica cache patches it forward).
    nominated_seed: NominatedPods | None = field(default=None, repr=False, compare=False)
    # Names of the nodes that differ from the table ``summary_seed`` summarises (None: not known), so a
    # sealed snapshot derives its summary looking at those nodes only.
    node_changes: frozenset[str] | None = field(default=None, repr=False, compare=False)

    @property
    def pdbs(self) -> Mapping[str, PDBInfo]:
        return cast("Mapping[str, PDBInfo]", self.objects.get("pdbs", _NONE))

    @property
    def podgroups(self) -> Mapping[str, PodGroupInfo]:
        return cast("Mapping[str, PodGroupInfo]", self.objects.get("podgroups", _NONE))

    @property
    def namespaces(self) -> Mapping[str, NamespaceInfo]:
        """Empty when Namespaces are not watched (a cluster always has some): see
        extenders.plugins.inter_pod_affinity.terms for what namespaceSelectors match then."""
        return cast("Mapping[str, NamespaceInfo]", self.objects.get("namespaces", _NONE))

    @property
    def pvcs(self) -> Mapping[str, PVCInfo]:
        return cast("Mapping[str, PVCInfo]", self.objects.get("pvcs", _NONE))

    # Services and controllers hold only their selectors: what the spreading scorers' default selector
    # is made of (extenders.plugins.helper.default_selector).
    @property
    def services(self) -> Mapping[str, ServiceInfo]:
        return cast("Mapping[str, ServiceInfo]", self.objects.get("services", _NONE))

    @property
    def replication_controllers(self) -> Mapping[str, ControllerInfo]:
        return cast("Mapping[str, ControllerInfo]", self.objects.get("replication_controllers", _NONE))

    @property
    def replica_sets(self) -> Mapping[str, ControllerInfo]:
        return cast("Mapping[str, ControllerInfo]", self.objects.get("replica_sets", _NONE))

    @property
    def stateful_sets(self) -> Mapping[str, ControllerInfo]:
        return cast("Mapping[str, ControllerInfo]", self.objects.get("stateful_sets", _NONE))

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
