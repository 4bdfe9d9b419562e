"""Pods with requests on nodes with allocatable resources ("gpu" stands for an extended resource)."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.sync.convert import node_facts, pod_info

GPU = "example.com/gpu"


def pod(name: str, requests: dict[str, str] | None = None, node: str = "") -> PodInfo:
    """A pod with one container and these requests ("gpu" stands for example.com/gpu)."""
    req = {GPU if k == "gpu" else k: v for k, v in (requests or {}).items()}
    resources: dict[str, Any] = {"requests": req} if req else {}
    return pod_info(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": resources}]},
        }
    )


def node(name: str, allocatable: dict[str, str], pods: list[PodInfo] | None = None) -> NodeInfo:
    alloc = {GPU if k == "gpu" else k: v for k, v in allocatable.items()}
    facts = node_facts({"metadata": {"name": name}, "status": {"allocatable": alloc}})
    return NodeInfo.build(name, facts, pods or [])


def assemble(
    case_alloc: dict[str, str], existing: list[dict[str, str]], incoming: dict[str, str]
) -> tuple[PodInfo, NodeInfo]:
    """The incoming pod and node ``n1`` holding pods with the ``existing`` requests."""
    pods = [pod(f"e{i}", req, "n1") for i, req in enumerate(existing)]
    return pod("in", incoming), node("n1", case_alloc, pods)
