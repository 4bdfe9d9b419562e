"""A pod's resource requests with kube-scheduler's arithmetic.

The effective request is the larger of (regular containers + restartable init
containers, i.e. sidecars) and the peak of the init phase, plus the pod overhead.
Init containers run one by one, but every sidecar started before one keeps running.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extenders.quantity import parse_quantity, resource_amount

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
# kube-scheduler's scoring defaults for containers that request nothing (never used for fit).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """Requests of one container; a limit with no request counts as the request (API defaulting)."""
    resources = container.get("resources") or {}
    out: dict[str, int] = {}
    for name, qty in (resources.get("limits") or {}).items():
        out[name] = resource_amount(name, qty)
    for name, qty in (resources.get("requests") or {}).items():
        out[name] = resource_amount(name, qty)
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max_into(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        if amount > into.get(name, 0):
            into[name] = amount


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def _combine(
    containers: Iterable[Mapping[str, Any]],
    init_containers: Iterable[Mapping[str, Any]],
    overhead: Mapping[str, Any] | None,
    per_container: Any,
) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in containers:
        _add(total, per_container(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in init_containers:
        req = per_container(container)
        if _is_sidecar(container):
            _add(sidecars, req)
            # A sidecar is running while later init containers run, so it raises their peak too.
            _max_into(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, req)
            _max_into(init_peak, step)
    _add(total, sidecars)
    _max_into(total, init_peak)
    for name, qty in (overhead or {}).items():
        total[name] = total.get(name, 0) + resource_amount(name, qty)
    return {k: v for k, v in total.items() if v}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of a pod spec, in scheduler units (millicores for cpu)."""
    return _combine(
        spec.get("containers") or [],
        spec.get("initContainers") or [],
        spec.get("overhead"),
        container_requests,
    )


def _nonzero_container(container: Mapping[str, Any]) -> dict[str, int]:
    req = container_requests(container)
    # Only a missing request is defaulted; an explicit zero stays zero, as in kube-scheduler.
    return {
        CPU: req.get(CPU, DEFAULT_MILLI_CPU_REQUEST),
        MEMORY: req.get(MEMORY, DEFAULT_MEMORY_REQUEST),
    }


def pod_nonzero_requests(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(millicpu, memory) with per-container defaults, as the scorers see a pod."""
    total = _combine(
        spec.get("containers") or [],
        spec.get("initContainers") or [],
        {k: v for k, v in (spec.get("overhead") or {}).items() if k in (CPU, MEMORY)},
        _nonzero_container,
    )
    return total.get(CPU, 0), total.get(MEMORY, 0)


def is_best_effort(spec: Mapping[str, Any]) -> bool:
    """True when no container sets a non-zero cpu or memory request or limit (QoS class BestEffort).

    As in Kubernetes' QoS computation, an explicit zero counts as unset.
    """
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            values = resources.get(section) or {}
            if any(k in values and parse_quantity(values[k]) > 0 for k in (CPU, MEMORY)):
                return False
    return True
