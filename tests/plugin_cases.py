"""Hand-written pods, nodes and snapshots for the plug-in tests (compact descriptions, built through the
same conversion the watch uses), and one registered predicate's verdict."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, Verdict
from extenders.plugins.registry import FILTERS
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info


def make_pod(
    name: str = "p",
    namespace: str = "default",
    *,
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    node_name: str = "",
    spec: dict[str, Any] | None = None,
    deleting: bool = False,
) -> PodInfo:
    """A PodInfo from a compact description; ``spec`` keys are merged into the pod spec."""
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": dict(requests or {})}}]}
    if node_name:
        body["nodeName"] = node_name
    body.update(spec or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": labels or {},
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return pod_info({"metadata": meta, "spec": body})


def make_node(
    name: str = "n1",
    *,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    conditions: dict[str, str] | None = None,
    pods: list[PodInfo] | None = None,
) -> NodeInfo:
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"} if allocatable is None else allocatable
    raw = {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "allocatable": alloc,
            "conditions": [{"type": k, "status": v} for k, v in (conditions or {"Ready": "True"}).items()],
        },
    }
    return NodeInfo.build(name, node_facts(raw), pods or [])


def make_snapshot(*nodes: NodeInfo) -> Snapshot:
    return Snapshot(nodes={n.name: n for n in nodes})


def run_predicate(name: str, pod: PodInfo, node: NodeInfo, snapshot: Snapshot | None = None) -> Verdict:
    """One registered predicate's verdict for ``pod`` on ``node`` (SKIP counts as a fit)."""
    predicate = FILTERS[name]
    state = predicate.prepare(pod, snapshot if snapshot is not None else make_snapshot(node))
    if state is SKIP:
        return FIT
    verdict: Verdict = predicate.check(pod, node, state)
    return verdict
