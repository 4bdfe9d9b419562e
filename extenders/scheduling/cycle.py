"""What a filter leaves for its pod's prioritize call on this replica, within one scheduling cycle.

kube-scheduler filters and scores a pod in one cycle, on one snapshot of its own. Prioritize soon after
this replica filtered the same pod reads the snapshot that filter read: the scores then describe the
cluster the verdicts did, and the call costs no Redis round trip. When the pod comes with the
resourceVersion it was filtered with (the API changes it with every write), the filter's view of it and
its class are taken too, instead of being derived again. With prioritize-ahead the scores of the nodes
that passed are computed as soon as the filter has answered, while kube-scheduler runs its own score
plug-ins (it calls prioritize only after them): a prioritize for those very nodes then only takes them.
Same pod, snapshot and nodes: the same answer.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict

from extenders.model import PodInfo
from extenders.scheduling.outcomes import NodeScores
from extenders.snapshot import Snapshot

CYCLE_SNAPSHOT_SECONDS = 1.0
CYCLES_KEPT = 256


@dataclasses.dataclass(slots=True, eq=False)
class Cycle:
    """One pod's filter, as its prioritize call may reuse it."""

    at: float  # time.monotonic() of the filter
    snapshot: Snapshot
    resource_version: str  # the pod's, as the filter got it ("" when it had none)
    pod: PodInfo
    class_key: str | None  # the pod's equivalence class (None: the cache is off)
    names: list[str] | None = None  # the nodes ``scores`` was computed for, ahead of the call
    scores: NodeScores | None = None  # prioritize's answer for ``names``


class Cycles:
    """The recent filters by pod uid: at most ``CYCLES_KEPT``, none older than ``CYCLE_SNAPSHOT_SECONDS``."""

    def __init__(self) -> None:
        self._by_uid: OrderedDict[str, Cycle] = OrderedDict()

    def remember(self, pod: PodInfo, resource_version: str, snapshot: Snapshot, class_key: str | None) -> Cycle:
        cycles = self._by_uid
        now = time.monotonic()
        cycles.pop(pod.uid, None)
        entry = cycles[pod.uid] = Cycle(now, snapshot, resource_version, pod, class_key)
        while cycles and (len(cycles) > CYCLES_KEPT or next(iter(cycles.values())).at < now - CYCLE_SNAPSHOT_SECONDS):
            cycles.popitem(last=False)
        return entry

    def take(self, uid: str) -> Cycle | None:
        """The pod's filter, if within the cycle's time; a cycle is taken once."""
        entry = self._by_uid.pop(uid, None) if uid else None
        if entry is None or entry.at < time.monotonic() - CYCLE_SNAPSHOT_SECONDS:
            return None
        return entry

    def take_scores(self, uid: str, resource_version: str, names: list[str]) -> NodeScores | None:
        """The scores computed ahead for this pod (same resourceVersion) and exactly ``names``; the
        cycle is then taken. Anything else leaves it for ``take``."""
        entry = self._by_uid.get(uid) if uid and resource_version else None
        if (
            entry is None
            or entry.scores is None
            or entry.resource_version != resource_version
            or entry.names != names
            or entry.at < time.monotonic() - CYCLE_SNAPSHOT_SECONDS
        ):
            return None
        del self._by_uid[uid]
        return entry.scores

    def holds(self, entry: Cycle) -> bool:
        """``entry`` is still its pod's latest filter, not yet taken."""
        return self._by_uid.get(entry.pod.uid) is entry
