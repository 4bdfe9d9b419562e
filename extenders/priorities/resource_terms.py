"""Which resources the resource-allocation scorers look at, and with what pod request.

Shared by LeastRequested, MostRequested and BalancedResourceAllocation (the three
strategies of kube-scheduler's resourceAllocationScorer). Computed once per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extenders.model import NodeInfo, PodInfo
from extenders.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

DEFAULT_RESOURCE_WEIGHTS: dict[str, int] = {CPU: 1, MEMORY: 1}

# How a term reads the node's requested amount.
NONZERO_CPU = 0
NONZERO_MEMORY = 1
PLAIN = 2

# (resource name, weight, the incoming pod's request, how to read the node's requested)
ResourceTerm = tuple[str, int, int, int]

_NATIVE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})


def resource_terms(pod: PodInfo, weights: Mapping[str, int], nonzero: bool) -> tuple[ResourceTerm, ...]:
    """The terms to score for ``pod``; ``nonzero`` uses the scorers' defaults for cpu/memory.

    As in kube-scheduler, a scalar resource (extended resource, hugepages, ...) the pod does
    not request is left out, so pods without GPUs are not steered by GPU usage; ``pods`` is
    never scored; a weight of zero or less disables a resource.
    """
    terms: list[ResourceTerm] = []
    for name, weight in (weights or DEFAULT_RESOURCE_WEIGHTS).items():
        if weight <= 0 or name == PODS:
            continue
        if name == CPU and nonzero:
            terms.append((name, weight, pod.nonzero_cpu, NONZERO_CPU))
        elif name == MEMORY and nonzero:
            terms.append((name, weight, pod.nonzero_memory, NONZERO_MEMORY))
        elif name in _NATIVE:
            terms.append((name, weight, pod.requests.get(name, 0), PLAIN))
        else:
            request = pod.requests.get(name, 0)
            if request:
                terms.append((name, weight, request, PLAIN))
    return tuple(terms)


def node_requested(node: NodeInfo, name: str, kind: int) -> int:
    """What the pods already on ``node`` request of one resource, read the term's way."""
    if kind == NONZERO_CPU:
        return node.nonzero_cpu
    if kind == NONZERO_MEMORY:
        return node.nonzero_memory
    return node.requested.get(name, 0)


def weighted_resource_score(
    node: NodeInfo, terms: tuple[ResourceTerm, ...], per_resource: Callable[[int, int], float]
) -> float:
    """Weighted mean of ``per_resource(requested incl. the pod, allocatable)`` over the terms.

    A resource the node does not offer is not scored (kube-scheduler skips it too).
    """
    if node.node is None:
        return 0.0
    allocatable = node.node.allocatable
    total = 0.0
    weight_sum = 0
    for name, weight, pod_request, kind in terms:
        capacity = allocatable.get(name, 0)
        if capacity <= 0:
            continue
        total += per_resource(node_requested(node, name, kind) + pod_request, capacity) * weight
        weight_sum += weight
    return total / weight_sum if weight_sum else 0.0
