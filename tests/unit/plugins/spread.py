"""Pods with owners and labels on nodes with hostname and zone labels, for the spreading scorer tests."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.sync.convert import node_facts, pod_info
from tests.unit.plugins.scoring import HOST


def pod(
    name: str,
    node: str = "",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    owner_uid: str | None = None,
    spec: dict[str, Any] | None = None,
    deleting: bool = False,
    owner: dict[str, Any] | None = None,
) -> PodInfo:
    """``owner_uid``: a ReplicaSet "rs" controls the pod; ``owner``: that reference's fields replaced."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}}
    if owner_uid or owner:
        reference = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid or "rs-uid"}
        meta["ownerReferences"] = [{**reference, "controller": True, **(owner or {})}]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    body = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}], **(spec or {})}
    return pod_info({"metadata": meta, "spec": body})


def node(
    name: str,
    labels: dict[str, str] | None = None,
    pods: list[PodInfo] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> NodeInfo:
    facts = node_facts(
        {"metadata": {"name": name, "labels": {HOST: name, **(labels or {})}}, "spec": {"taints": taints or []}}
    )
    return NodeInfo.build(name, facts, pods or [])
