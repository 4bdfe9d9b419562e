"""Which gang a pod belongs to, and who the gang's members are in a snapshot.

Gangs are per namespace: the key is ``namespace/name``. Several label conventions are
accepted (``GangConfig.labels``); for the scheduler-plugins label the quorum comes from the
PodGroup object's ``spec.minMember`` when the snapshot has one, else from the
``scheduling.x-k8s.io/min-available`` annotation. A gang whose minimum cannot be told is still
a gang (its members fail filter with the reason) so they never bind one by one by accident.

A pod of a native pod group (``spec.schedulingGroup`` from 1.36, ``spec.workloadRef`` in 1.35; the
API server keeps the field only with its ``GenericWorkload`` gate on) is no gang member here, whatever
its labels: kube-scheduler's GangScheduling plug-in holds the group, and holding it here as well could
only make both wait on each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from extenders.gang.config import GangConfig
from extenders.model import NodeInfo, PodGroupInfo, PodInfo
from extenders.snapshot import Snapshot

DEFAULT_CONFIG = GangConfig()


@dataclass(frozen=True, slots=True)
class GangRef:
    """A pod's gang: identity, quorum (None when unknown, see ``error``) and per-gang overrides."""

    namespace: str
    name: str
    min_member: int | None
    label: str = ""  # the name key that matched
    error: str = ""
    window_seconds: float | None = None  # PodGroup scheduleTimeoutSeconds
    created: str = ""  # PodGroup creationTimestamp, for admission order

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_gang(self) -> bool:
        """Gangs of one are plain pods: nothing to wait for."""
        return self.min_member is None or self.min_member > 1


def _lookup(pod: PodInfo, key: str) -> str:
    return (pod.labels.get(key) or pod.annotations.get(key) or "").strip()


def _positive_int(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


def gang_ref(
    pod: PodInfo, podgroups: Mapping[str, PodGroupInfo] | None = None, config: GangConfig = DEFAULT_CONFIG
) -> GangRef | None:
    """The pod's gang, or None when no configured label names one, or when the pod belongs to a native
    pod group: kube-scheduler's own gang plug-in holds those, and a pod is never held twice."""
    if pod.native_group:
        return None
    for name_key, min_key in config.labels:
        name = _lookup(pod, name_key)
        if not name:
            continue
        key = f"{pod.namespace}/{name}"
        group = podgroups.get(key) if podgroups and name_key == config.podgroup_label else None
        timeout = None
        created = ""
        if group is not None:
            created = group.creation_timestamp
            if config.use_podgroup_timeout and group.schedule_timeout_seconds:
                timeout = float(group.schedule_timeout_seconds)
            if group.min_member > 0:
                return GangRef(pod.namespace, name, group.min_member, name_key, "", timeout, created)
        raw = _lookup(pod, min_key)
        minimum = _positive_int(raw) if raw else None
        if minimum is not None:
            return GangRef(pod.namespace, name, minimum, name_key, "", timeout, created)
        if raw:
            error = f"gang {key}: {min_key}={raw!r} is not a positive integer"
        elif name_key == config.podgroup_label:
            error = f"gang {key}: no PodGroup {key} with spec.minMember and no {min_key} annotation on the pod"
        else:
            error = f"gang {key}: the pod has no {min_key} label giving the gang's minimum"
        return GangRef(pod.namespace, name, None, name_key, error, timeout, created)
    return None


def names_a_gang(pod: PodInfo, config: GangConfig = DEFAULT_CONFIG) -> bool:
    """Whether a configured label names a gang for ``pod``, whatever its PodGroup or minimum: a recent
    read may not have the PodGroup yet, so the filter and bind of such a pod read after arriving."""
    return gang_ref(pod, None, config) is not None


# A pod's gang as preemption reads it: ``(namespace/name, minMember)``, or None outside any gang.
GangOf = Callable[[PodInfo], tuple[str, int] | None]


def gang_of(
    pod: PodInfo, podgroups: Mapping[str, PodGroupInfo] | None = None, config: GangConfig = DEFAULT_CONFIG
) -> tuple[str, int] | None:
    """``(namespace/name, minMember)`` for a gang member with a known quorum, else None (for preemption)."""
    ref = gang_ref(pod, podgroups, config)
    if ref is None or ref.min_member is None:
        return None
    return ref.key, ref.min_member


def gang_of_for(snapshot: Snapshot, config: GangConfig = DEFAULT_CONFIG) -> GangOf:
    """``gang_of`` bound to a snapshot's PodGroups: the ``GangOf`` callable ``extenders.preemption`` takes."""
    podgroups = snapshot.podgroups

    def _gang_of(pod: PodInfo) -> tuple[str, int] | None:
        return gang_of(pod, podgroups, config)

    return _gang_of


def timestamp_ms(value: str | None) -> int | None:
    """An RFC 3339 timestamp in ms since the epoch (None when absent or unparsable)."""
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


@dataclass(slots=True)
class GangMembers:
    """A gang's live members in one snapshot (terminating and finished pods are not members)."""

    key: str
    pending: list[PodInfo] = field(default_factory=list)  # not placed anywhere
    held: list[PodInfo] = field(default_factory=list)  # placed as assumed: reserved, bind in flight
    bound: list[PodInfo] = field(default_factory=list)  # placed and confirmed by the watch

    @property
    def count(self) -> int:
        return len(self.pending) + len(self.held) + len(self.bound)

    @property
    def placed(self) -> int:
        return len(self.held) + len(self.bound)

    def all(self) -> Iterable[PodInfo]:
        yield from self.bound
        yield from self.held
        yield from self.pending

    def earliest_creation_ms(self) -> int | None:
        stamps = [t for t in (timestamp_ms(p.creation_timestamp) for p in self.all()) if t is not None]
        return min(stamps) if stamps else None

    def priority(self) -> int:
        """The gang's priority: the highest of its members' (their PriorityClass values)."""
        return max((p.priority for p in self.all()), default=0)

    def bound_uids(self) -> list[str]:
        return [p.uid for p in self.bound]

    def placed_uids(self) -> list[str]:
        return [p.uid for p in self.bound] + [p.uid for p in self.held]


def _live(pod: PodInfo) -> bool:
    return not pod.terminating and not pod.terminal


def gang_key(pod: PodInfo, config: GangConfig = DEFAULT_CONFIG) -> str | None:
    """Just the gang's ``namespace/name`` (no quorum lookup): what indexing members needs; None for a
    pod of a native pod group, as in ``gang_ref``."""
    if pod.native_group:
        return None
    for name_key, _min_key in config.labels:
        name = _lookup(pod, name_key)
        if name:
            return f"{pod.namespace}/{name}"
    return None


NodeEntries = list[tuple[str, PodInfo]]  # (gang key, pod) of the gang members placed on one node


class GangIndex:
    """Every gang's members in one snapshot (snapshots are immutable, so one index per snapshot).

    ``node_entries`` lets a caller hand over the per-node member lists it already computed for
    NodeInfo objects an earlier snapshot shared (see ``GangIndexCache``).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        config: GangConfig = DEFAULT_CONFIG,
        node_entries: Mapping[str, NodeEntries] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.gangs: dict[str, GangMembers] = {}
        placed: set[str] = set()
        for name, info in snapshot.nodes.items():
            entries = node_entries[name] if node_entries is not None else self.entries(info.pods.values(), config)
            for key, pod in entries:
                placed.add(pod.uid)
                if _live(pod):
                    members = self.members_for(key)
                    (members.held if pod.assumed else members.bound).append(pod)
        for uid, pod in snapshot.pending.items():
            if uid in placed or not _live(pod):
                continue
            pending_key = gang_key(pod, config)
            if pending_key is not None:
                self.members_for(pending_key).pending.append(pod)
        self._regroup_held(snapshot, config)

    def _regroup_held(self, snapshot: Snapshot, config: GangConfig) -> None:
        """A held member's reservation carries the pod as it was at bind; its pending record is the
        API server's current one. When that one is no longer live, or names another gang (labels
        changed while held), it decides."""
        for key, members in list(self.gangs.items()):
            for pod in list(members.held):
                current = snapshot.pending.get(pod.uid)
                if current is None:
                    continue
                now_key = gang_key(current, config) if _live(current) else None
                if now_key == key:
                    continue
                members.held.remove(pod)
                if now_key is not None:
                    self.members_for(now_key).held.append(pod)
            if members.count == 0:
                del self.gangs[key]

    @staticmethod
    def entries(pods: Iterable[PodInfo], config: GangConfig) -> NodeEntries:
        return [(key, pod) for pod in pods if (key := gang_key(pod, config)) is not None]

    def members_for(self, key: str) -> GangMembers:
        members = self.gangs.get(key)
        if members is None:
            members = self.gangs[key] = GangMembers(key)
        return members

    def members(self, key: str) -> GangMembers:
        return self.gangs.get(key) or GangMembers(key)

    def ref(self, key: str) -> GangRef | None:
        """The gang's reference (quorum) as its first member states it."""
        members = self.gangs.get(key)
        first = next(iter(members.all()), None) if members else None
        return gang_ref(first, self.snapshot.podgroups, self.config) if first is not None else None


class GangIndexCache:
    """The index of the last snapshot seen, rebuilt incrementally: a NodeInfo object shared with
    the previous snapshot (unchanged node) keeps its member list, so a new snapshot costs only
    its changed nodes and its pending pods. Holds a strong reference to the snapshot indexed."""

    def __init__(self, config: GangConfig = DEFAULT_CONFIG) -> None:
        self.config = config
        self._snapshot: Snapshot | None = None
        self._index: GangIndex | None = None
        self._nodes: dict[str, tuple[NodeInfo, NodeEntries]] = {}

    def get(self, snapshot: Snapshot) -> GangIndex:
        if self._index is not None and self._snapshot is snapshot:
            return self._index
        nodes: dict[str, tuple[NodeInfo, NodeEntries]] = {}
        for name, info in snapshot.nodes.items():
            cached = self._nodes.get(name)
            if cached is not None and cached[0] is info:
                nodes[name] = cached
            else:
                nodes[name] = (info, GangIndex.entries(info.pods.values(), self.config))
        self._nodes = nodes
        self._index = GangIndex(snapshot, self.config, {name: entries for name, (_, entries) in nodes.items()})
        self._snapshot = snapshot
        return self._index


def order_score(ref: GangRef, members: GangMembers) -> int:
    """Admission order: the PodGroup's creation, else the earliest member's, else now (ms)."""
    stamp = timestamp_ms(ref.created) or members.earliest_creation_ms()
    return stamp if stamp is not None else int(time.time() * 1000)
