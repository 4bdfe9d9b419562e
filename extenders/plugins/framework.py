"""What a scheduling plug-in is: kube-scheduler's framework, reduced to what an extender runs.

A filter plug-in prepares per-pod state once over the snapshot (PreFilter, which may answer
SKIP), then checks one node at a time (Filter), pure and cheap. A score plug-in prepares per-pod
state (PreScore), scores each candidate, and normalises the raw scores over the candidates to
0..MAX_PRIORITY (NormalizeScore). Optional hooks are found once, when the registry is built
(``Filter.of`` / ``Scorer.of``), never per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from extenders.model import NodeInfo, PodInfo
from extenders.snapshot import Snapshot
from extenders.snapshot.summary import ClusterSummary

S = TypeVar("S")

MAX_PRIORITY = 10  # extender/v1 MaxExtenderPriority


class NodeFamily:
    """The parts of one node a plug-in may read, named so the equivalence cache can tell which
    changes invalidate a cached answer (see extenders.equivalence). A plug-in declares them in
    ``node_families``; one that reads other nodes declares nothing and is never cached."""

    NAME = "name"  # the node's name: never changes
    LABELS = "labels"
    TAINTS = "taints"  # taints and spec.unschedulable
    CONDITIONS = "conditions"
    RESOURCES = "resources"  # allocatable, requested (with non-zero defaults) and the pod count
    PORTS = "ports"  # host ports in use
    PODS = "pods"  # which pods are there (their specs do not change)


@dataclass(slots=True, frozen=True)
class Verdict:
    """One filter's answer for one node.

    ``unresolvable`` marks failures that evicting pods cannot fix (selector, taint, unknown
    node): they go to FailedAndUnresolvableNodes so no preemption is tried.
    """

    fit: bool
    reason: str = ""
    unresolvable: bool = False


FIT = Verdict(True)


class _Skip:
    """Type of SKIP; a singleton so ``state is SKIP`` is the test."""

    _instance: _Skip | None = None

    def __new__(cls) -> _Skip:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "SKIP"


# ``prepare`` returns SKIP when the filter passes every node for this pod (kube-scheduler's
# PreFilter Skip status): the engine then does not call ``check`` at all.
SKIP = _Skip()


class FilterPlugin(Protocol[S]):
    """``prepare`` and ``check``, and one optional hook found once at registration:

    ``adjust(state, pod, old, new) -> state``, for a filter whose prepared state depends on other
    nodes' pods (PreFilterExtensions): the state as it would be had ``prepare`` seen ``new`` in
    place of ``old`` (the same node with pods removed or added, e.g. preemption victims), without
    rescanning the snapshot. Filters without it have node-independent state.

    ``check_all(pod, nodes, state) -> list[Verdict]``, for a filter that reads other nodes: ``check``
    on each of ``nodes``, in order, at once. Such a filter runs on every candidate of every call (its
    verdicts are never cached), and deciding them together saves a call per node.

    And one optional attribute, ``node_families``: the ``NodeFamily`` parts of the node ``check``
    reads, for a filter whose verdict depends on nothing else (the pod's fields aside) and whose
    ``prepare`` reads only the pod. Only such filters' verdicts are cached per equivalence class.
    Such a filter whose verdict for some pods also depends on other nodes has a ``cacheable(state)
    -> bool`` hook, False for those pods' states: their calls then bypass the cache.
    """

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> S:
        """Per-pod state computed over the whole snapshot (or SKIP)."""
        ...

    def check(self, pod: PodInfo, node: NodeInfo, state: S) -> Verdict: ...


@dataclass(slots=True, frozen=True)
class ScoringContext:
    """Policy knobs some scorers read (resource weights, symmetric affinity weight)."""

    resource_weights: dict[str, int]
    hard_pod_affinity_symmetric_weight: int = 1
    # The snapshot's summary, handed over by the engine for the hooks that get no snapshot
    # (``score_all``); ``summary_of`` reads it, or the snapshot's own when called without one.
    summary: ClusterSummary | None = None


def summary_of(snapshot: Snapshot, ctx: ScoringContext) -> ClusterSummary:
    """The snapshot's summary, as the engine handed it over (or from the snapshot itself)."""
    return ctx.summary if ctx.summary is not None else snapshot.summary()


ConstantScore = tuple[float, float]  # (raw, normalised): what a ``constant`` hook returns


class ScorePlugin(Protocol[S]):
    """The map/reduce pair. Two optional hooks, found once at registration:

    ``constant(pod, snapshot, nodes, state, ctx) -> (raw, score) | None``: with the prepared
    state, ``(raw, score)`` when every node of ``nodes`` would get that raw and normalised
    score (the engine then skips ``score``/``normalize``), else None. Must be cheap.

    ``score_all(pod, nodes, state, ctx) -> list[float]``: ``score`` for each node, in order,
    in one loop (per-node calls dominate the cost of the cheap scorers).

    ``normalize_values(values, state) -> list[float]``: ``normalize`` over a list of raw scores, one
    per node in the order ``prepare`` was given them (all distinct); a scorer whose normalisation
    reads names keeps them in its state.

    ``node_families`` (a class attribute): when ``score`` reads only the prepared state (a
    function of the pod alone) and these parts of the one node, its raw scores are kept per
    equivalence class; absent when it reads other nodes.
    """

    def prepare(self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext) -> S: ...

    def score(self, pod: PodInfo, node: NodeInfo, state: S, ctx: ScoringContext) -> float: ...

    def normalize(self, raw: dict[str, float], state: S) -> dict[str, float]:
        """Raw scores by node name -> scores in 0..MAX_PRIORITY."""
        ...


AdjustFn = Callable[[Any, PodInfo, NodeInfo | None, NodeInfo], Any]
CheckAllFn = Callable[[PodInfo, list[NodeInfo], Any], list[Verdict]]
ConstantFn = Callable[[PodInfo, Snapshot, list[NodeInfo], Any, ScoringContext], ConstantScore | None]
ScoreAllFn = Callable[[PodInfo, list[NodeInfo], Any, ScoringContext], list[float]]
NormalizeValuesFn = Callable[[list[float], Any], list[float]]


@dataclass(slots=True, frozen=True)
class Filter:
    """A registered filter: its methods bound, its optional ``adjust`` resolved (None if absent)."""

    name: str
    prepare: Callable[[PodInfo, Snapshot], Any]
    check: Callable[[PodInfo, NodeInfo, Any], Verdict]
    adjust: AdjustFn | None
    node_families: tuple[str, ...] | None = None  # None: reads other nodes, never cached
    cacheable: Callable[[Any], bool] | None = None  # None: every state of a node-local filter is
    check_all: CheckAllFn | None = None  # None: ``check`` node by node

    @classmethod
    def of(cls, name: str, plugin: FilterPlugin[Any]) -> Filter:
        families = getattr(plugin, "node_families", None)
        adjust = getattr(plugin, "adjust", None)
        return cls(
            name,
            plugin.prepare,
            plugin.check,
            adjust,
            families,
            getattr(plugin, "cacheable", None),
            getattr(plugin, "check_all", None),
        )


@dataclass(slots=True, frozen=True)
class Scorer:
    """A registered scorer: its methods bound, its optional hooks resolved (None if absent)."""

    name: str
    prepare: Callable[[PodInfo, Snapshot, list[NodeInfo], ScoringContext], Any]
    score: Callable[[PodInfo, NodeInfo, Any, ScoringContext], float]
    normalize: Callable[[dict[str, float], Any], dict[str, float]]
    constant: ConstantFn | None
    score_all: ScoreAllFn | None
    node_families: tuple[str, ...] | None = None  # None: reads other nodes, never cached
    normalize_values: NormalizeValuesFn | None = None

    @classmethod
    def of(cls, name: str, plugin: ScorePlugin[Any]) -> Scorer:
        return cls(
            name,
            plugin.prepare,
            plugin.score,
            plugin.normalize,
            getattr(plugin, "constant", None),
            getattr(plugin, "score_all", None),
            getattr(plugin, "node_families", None),
            getattr(plugin, "normalize_values", None),
        )
