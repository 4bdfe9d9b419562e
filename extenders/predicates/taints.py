"""PodToleratesNodeTaints: kube-scheduler's TaintToleration filter.

Only NoSchedule and NoExecute taints block; PreferNoSchedule is left to scoring. The
reason names the first untolerated taint. Unresolvable.
"""

from __future__ import annotations

from typing import Any

from extenders.labels import first_untolerated_taint
from extenders.model import NodeInfo, PodInfo
from extenders.predicates.base import FIT, Verdict, register
from extenders.snapshot import Snapshot

NAME = "PodToleratesNodeTaints"
DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def untolerated_reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


class PodToleratesNodeTaints:
    name = NAME

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return pod.tolerations

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        facts = node.node
        if facts is None or not facts.taints:
            return FIT
        taint = first_untolerated_taint(facts.taints, state, DO_NOT_SCHEDULE_EFFECTS)
        if taint is None:
            return FIT
        return Verdict(False, untolerated_reason(taint.key, taint.value), unresolvable=True)


register(PodToleratesNodeTaints())
