"""Containers and pod specs for the request-arithmetic tests, written the way the API serves them."""

from __future__ import annotations

from typing import Any

from extenders.resources import pod_resources

GI = 2**30
MI = 2**20


def pod_nonzero_requests(spec: dict[str, Any], status: dict[str, Any] | None = None) -> tuple[int, int]:
    """(millicpu, memory) as a node's totals count the pod: ``pod_resources``' non-zero pair."""
    resources = pod_resources(spec, status)
    return resources.nonzero_cpu, resources.nonzero_memory


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def sidecar(requests: dict[str, Any]) -> dict[str, Any]:
    return c(requests, restartPolicy="Always")
