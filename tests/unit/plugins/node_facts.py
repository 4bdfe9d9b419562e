"""An incoming pod and nodes described by their facts (labels, taints, images, annotations), for the scorer tests."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.sync.convert import node_facts, pod_info


def pod(spec: dict[str, Any] | None = None, owner: dict[str, Any] | None = None) -> PodInfo:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **(spec or {})}
    meta: dict[str, Any] = {"name": "in", "namespace": "default", "uid": "uid-in"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    return pod_info({"metadata": meta, "spec": body})


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    images: list[tuple[list[str], int]] | None = None,
    annotations: dict[str, str] | None = None,
) -> NodeInfo:
    facts = node_facts(
        {
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"taints": taints or []},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi"},
                "images": [{"names": names, "sizeBytes": size} for names, size in images or []],
            },
        }
    )
    return NodeInfo.build(name, facts, [])
