"""PodFitsHost: kube-scheduler's NodeName filter (a pod that names its node runs only there)."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, NodeFamily, Verdict
from extenders.snapshot import Snapshot

REASON = "node(s) didn't match the requested node name"
_FAIL = Verdict(False, REASON, unresolvable=True)


class NodeNameFilter:
    node_families = (NodeFamily.NAME,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return pod.node_name or SKIP

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        return FIT if node.name == state else _FAIL
