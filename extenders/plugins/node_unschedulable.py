"""CheckNodeUnschedulable: kube-scheduler's NodeUnschedulable filter (cordoned nodes).

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint may still
land there (DaemonSet pods do). Unresolvable.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo, Taint
from extenders.plugins.framework import FIT, NodeFamily, Verdict
from extenders.snapshot import Snapshot
from extenders.tolerations import tolerations_tolerate

REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_FAIL = Verdict(False, REASON, unresolvable=True)


class NodeUnschedulableFilter:
    node_families = (NodeFamily.TAINTS,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return tolerations_tolerate(pod.tolerations, UNSCHEDULABLE_TAINT)

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        facts = node.node
        if facts is None or not facts.unschedulable or state:
            return FIT
        return _FAIL
