"""CheckNodeMemoryPressure / CheckNodeDiskPressure / CheckNodePIDPressure: the classic predicates.

Memory pressure blocks only BestEffort pods; disk and PID pressure block every pod. Today
the node lifecycle controller expresses these as ``node.kubernetes.io/*-pressure`` taints,
so (unlike the classic predicates) a pod that tolerates the matching NoSchedule taint, as
DaemonSet pods do, is let through. Unresolvable: evicting pods does not clear pressure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extenders.labels import tolerations_tolerate
from extenders.model import NodeInfo, PodInfo, Taint
from extenders.predicates.base import FIT, SKIP, Verdict, register
from extenders.snapshot import Snapshot

MEMORY_PRESSURE = "node(s) had memory pressure"
DISK_PRESSURE = "node(s) had disk pressure"
PID_PRESSURE = "node(s) had pid pressure"


@dataclass(slots=True)
class PressurePredicate:
    name: str
    condition: str
    taint_key: str
    reason: str
    best_effort_only: bool = False

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        if self.best_effort_only and not pod.best_effort:
            return SKIP
        if tolerations_tolerate(pod.tolerations, Taint(self.taint_key, "", "NoSchedule")):
            return SKIP
        return None

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        facts = node.node
        if facts is not None and facts.conditions.get(self.condition) == "True":
            return Verdict(False, self.reason, unresolvable=True)
        return FIT


register(
    PressurePredicate(
        "CheckNodeMemoryPressure",
        "MemoryPressure",
        "node.kubernetes.io/memory-pressure",
        MEMORY_PRESSURE,
        best_effort_only=True,
    )
)
register(PressurePredicate("CheckNodeDiskPressure", "DiskPressure", "node.kubernetes.io/disk-pressure", DISK_PRESSURE))
register(PressurePredicate("CheckNodePIDPressure", "PIDPressure", "node.kubernetes.io/pid-pressure", PID_PRESSURE))
