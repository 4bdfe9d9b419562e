"""Which resources the resource-allocation scorers look at, and with what pod request.

Shared by LeastRequested, MostRequested and BalancedResourceAllocation (the three
strategies of kube-scheduler's resourceAllocationScorer). Computed once per pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import add, mul, sub, truediv
from typing import cast

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY
from extenders.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from extenders.snapshot.summary import ClusterSummary

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
    # The pod being scheduled may count other amounts than it adds to a node once placed: kube-scheduler's
    # Fit scorer ignores its pod-level requests (extenders.resources.fit_score_requests). Only the
    # non-zero terms read them, and only NodeResourcesFit's strategies ask for those.
    nonzero_cpu, nonzero_memory = pod.score_nonzero or (pod.nonzero_cpu, pod.nonzero_memory)
    for name, weight in (weights or DEFAULT_RESOURCE_WEIGHTS).items():
        if weight <= 0 or name == PODS:
            continue
        if name == CPU and nonzero:
            terms.append((name, weight, nonzero_cpu, NONZERO_CPU))
        elif name == MEMORY and nonzero:
            terms.append((name, weight, nonzero_memory, NONZERO_MEMORY))
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


def _reads_extractor(reads: tuple[tuple[str, int], ...]) -> Callable[[NodeInfo], tuple[int, ...] | None]:
    def extract(info: NodeInfo) -> tuple[int, ...] | None:
        facts = info.node
        if facts is None:
            return None
        allocatable = facts.allocatable
        row: list[int] = []
        for name, kind in reads:
            row.append(allocatable.get(name, 0))
            row.append(node_requested(info, name, kind))
        return tuple(row)

    return extract


def resource_rows(summary: ClusterSummary, terms: tuple[ResourceTerm, ...]) -> dict[str, tuple[int, ...]]:
    """Node name -> (allocatable, requested) per term, flattened, for every node with a node object.

    Kept in the cluster summary, so a call reads one compact row per candidate.
    """
    reads = tuple((name, kind) for name, _weight, _request, kind in terms)
    return summary.column(("resource-rows", reads), _reads_extractor(reads))


def resource_columns(
    rows: dict[str, tuple[int, ...]], names: list[str], terms: tuple[ResourceTerm, ...]
) -> list[tuple[Sequence[int], list[int], int]] | None:
    """Per term (allocatable, requested incl. the pod, weight) over ``names``, for the vector paths.

    None when some node has no row or does not offer a resource, or there are no names: the
    scalar loop handles those.
    """
    maybe = list(map(rows.get, names))
    if not maybe or None in maybe:
        return None
    transposed = list(zip(*cast(list[tuple[int, ...]], maybe), strict=True))
    columns: list[tuple[Sequence[int], list[int], int]] = []
    for i, (_name, weight, pod_request, _kind) in enumerate(terms):
        capacity = transposed[2 * i]
        if min(capacity) <= 0:
            return None
        columns.append((capacity, list(map(add, transposed[2 * i + 1], repeat(pod_request))), weight))
    return columns


def _weighted_mean(parts: list[tuple[Iterable[float], int]], count: int) -> list[float]:
    """``Σ score * weight / Σ weight`` per node, summed in term order as the scalar loop does."""
    if not parts:
        return [0.0] * count
    weight_sum = sum(weight for _, weight in parts)
    first, weight = parts[0]
    totals: Iterable[float] = map(mul, first, repeat(weight))
    for scores, weight in parts[1:]:
        totals = map(add, totals, map(mul, scores, repeat(weight)))
    return list(map(truediv, totals, repeat(weight_sum)))


def free_share(requested: int, capacity: int) -> float:
    """LeastRequested's per-resource score: the free share, 0 when over-committed."""
    return (capacity - requested) * MAX_PRIORITY / capacity if requested <= capacity else 0.0


def used_share(requested: int, capacity: int) -> float:
    """MostRequested's per-resource score: the used share, full when over-committed."""
    return MAX_PRIORITY if requested >= capacity else requested * MAX_PRIORITY / capacity


def _row_scores(
    nodes: list[NodeInfo],
    terms: tuple[ResourceTerm, ...],
    rows: dict[str, tuple[int, ...]],
    share: Callable[[int, int], float],
) -> list[float]:
    """``weighted_resource_score`` per node, reading the summary's resource rows."""
    out: list[float] = []
    append = out.append
    indexed = [(2 * i, weight, pod_request) for i, (_name, weight, pod_request, _kind) in enumerate(terms)]
    for node in nodes:
        row = rows.get(node.name)
        if row is None:
            append(0.0)
            continue
        total = 0.0
        weight_sum = 0
        for at, weight, pod_request in indexed:
            capacity = row[at]
            if capacity <= 0:
                continue
            total += share(row[at + 1] + pod_request, capacity) * weight
            weight_sum += weight
        append(total / weight_sum if weight_sum else 0.0)
    return out


def free_share_scores(
    nodes: list[NodeInfo], terms: tuple[ResourceTerm, ...], rows: dict[str, tuple[int, ...]]
) -> list[float]:
    """``weighted_resource_score(node, terms, free_share)`` for each node (LeastRequested)."""
    columns = resource_columns(rows, [node.name for node in nodes], terms)
    if columns is None:
        return _row_scores(nodes, terms, rows, free_share)
    # Column-wise: (capacity - requested) * MAX / capacity, and 0 where that is negative (over-committed).
    parts: list[tuple[Iterable[float], int]] = []
    for capacities, requests, term_weight in columns:
        share = map(truediv, map(mul, map(sub, capacities, requests), repeat(MAX_PRIORITY)), capacities)
        parts.append((map(max, share, repeat(0.0)), term_weight))
    return _weighted_mean(parts, len(nodes))


def used_share_scores(
    nodes: list[NodeInfo], terms: tuple[ResourceTerm, ...], rows: dict[str, tuple[int, ...]]
) -> list[float]:
    """``weighted_resource_score(node, terms, used_share)`` for each node (MostRequested)."""
    return _row_scores(nodes, terms, rows, used_share)


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
