"""What a predicate is, and the registry that a policy picks predicates from by name.

A predicate mirrors a kube-scheduler Filter plugin: an optional ``prepare`` that looks at
the whole snapshot once per pod (PreFilter), then ``check`` per node, pure and cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from extenders.model import NodeInfo, PodInfo
from extenders.snapshot import Snapshot


@dataclass(slots=True, frozen=True)
class Verdict:
    """One predicate's answer for one node.

    ``unresolvable`` marks failures that evicting pods cannot fix (selector, taint,
    unknown node): they go to FailedAndUnresolvableNodes so no preemption is tried.
    """

    fit: bool
    reason: str = ""
    unresolvable: bool = False


FIT = Verdict(True)


class Predicate(Protocol):
    name: str

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        """Per-pod state computed over the whole snapshot (None when not needed)."""
        ...

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict: ...


@dataclass(slots=True, frozen=True)
class SimplePredicate:
    """A predicate that needs nothing beyond the pod and the node."""

    name: str
    fn: Callable[[PodInfo, NodeInfo], Verdict]

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return None

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        return self.fn(pod, node)


PREDICATES: dict[str, Predicate] = {}


def register(predicate: Predicate) -> Predicate:
    if predicate.name in PREDICATES:
        raise ValueError(f"predicate {predicate.name!r} registered twice")
    PREDICATES[predicate.name] = predicate
    return predicate


# --- Extensions (backwards compatible) -------------------------------------------------


class _Skip:
    """Type of SKIP; a singleton so ``state is SKIP`` is the test."""

    _instance: _Skip | None = None

    def __new__(cls) -> _Skip:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "SKIP"


# ``prepare`` returns SKIP when the predicate passes every node for this pod (kube-scheduler's
# PreFilter Skip status): the engine then does not call ``check`` at all.
SKIP = _Skip()


class AdjustablePredicate(Predicate, Protocol):
    """A predicate whose prepared state depends on other nodes' pods (PreFilterExtensions).

    ``adjust`` returns the state as it would be had ``prepare`` seen ``new`` in place of
    ``old`` (the same node with pods removed or added, e.g. preemption victims), without
    rescanning the snapshot. Predicates without ``adjust`` have node-independent state.
    """

    def adjust(self, state: Any, pod: PodInfo, old: NodeInfo | None, new: NodeInfo) -> Any: ...
