"""CheckNodeCondition: the classic node-condition predicate, kept in the default policy.

Today's kube-scheduler relies on the node lifecycle controller's not-ready/unreachable
taints instead; we keep the direct check so a node the controller has not tainted yet is
still avoided. A node fails when its Ready condition is present and not "True", or when
NetworkUnavailable is "True". A node that reports no Ready condition at all passes, as in
the classic predicate. Unresolvable.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.predicates.base import FIT, Verdict, register
from extenders.snapshot import Snapshot

NAME = "CheckNodeCondition"
NOT_READY = "node(s) were not ready"
NETWORK_UNAVAILABLE = "node(s) had unavailable network"


class CheckNodeCondition:
    name = NAME

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


register(CheckNodeCondition())
