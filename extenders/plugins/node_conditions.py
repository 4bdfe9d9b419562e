"""Node conditions: the classic CheckNodeCondition and node-pressure predicates.

CheckNodeCondition: today's kube-scheduler relies on the node lifecycle controller's
not-ready/unreachable taints instead; we keep the direct check so a node the controller has not
tainted yet is still avoided. A node fails when its Ready condition is present and not "True",
or when NetworkUnavailable is "True". A node that reports no Ready condition at all passes, as in
the classic predicate. Unresolvable.

CheckNodeMemoryPressure / CheckNodeDiskPressure / CheckNodePIDPressure: memory pressure blocks
only BestEffort pods; disk and PID pressure block every pod. Today the node lifecycle controller
expresses these as ``node.kubernetes.io/*-pressure`` taints, so (unlike the classic predicates)
a pod that tolerates the matching NoSchedule taint, as DaemonSet pods do, is let through.
Unresolvable: evicting pods does not clear pressure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from extenders.model import NodeInfo, PodInfo, Taint
from extenders.plugins.framework import FIT, SKIP, NodeFamily, Verdict
from extenders.snapshot import Snapshot
from extenders.tolerations import tolerations_tolerate

NOT_READY = "node(s) were not ready"
NETWORK_UNAVAILABLE = "node(s) had unavailable network"
MEMORY_PRESSURE = "node(s) had memory pressure"
DISK_PRESSURE = "node(s) had disk pressure"
PID_PRESSURE = "node(s) had pid pressure"


class NodeConditionFilter:
    node_families = (NodeFamily.CONDITIONS,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return None

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        facts = node.node
        if facts is None:
            return FIT
        conditions = facts.conditions
        reasons: list[str] = []
        ready = conditions.get("Ready")
        if ready is not None and ready != "True":
            reasons.append(NOT_READY)
        if conditions.get("NetworkUnavailable") == "True":
            reasons.append(NETWORK_UNAVAILABLE)
        if not reasons:
            return FIT
        return Verdict(False, ", ".join(reasons), unresolvable=True)


@dataclass(slots=True)
class PressureFilter:
    node_families: ClassVar[tuple[str, ...]] = (NodeFamily.CONDITIONS,)
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


def memory_pressure() -> PressureFilter:
    return PressureFilter(
        "MemoryPressure", "node.kubernetes.io/memory-pressure", MEMORY_PRESSURE, best_effort_only=True
    )


def disk_pressure() -> PressureFilter:
    return PressureFilter("DiskPressure", "node.kubernetes.io/disk-pressure", DISK_PRESSURE)


def pid_pressure() -> PressureFilter:
    return PressureFilter("PIDPressure", "node.kubernetes.io/pid-pressure", PID_PRESSURE)
