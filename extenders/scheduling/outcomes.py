"""What the verbs take and give back, in scheduling terms: no wire format, no web framework."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extenders.model import PodInfo


class NodeScores(dict[str, int]):
    """Prioritize's answer: a score for each candidate node, in the order the nodes were asked for.

    ``answer`` is what the web layer made of the scores when they were computed ahead of their call
    (``Scheduler``'s ``shape_ahead``), so that work stays off the call's path; None otherwise.
    """

    __slots__ = ("answer",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answer: Any = None


class SnapshotUnavailable(Exception):
    """Redis (and so the shared snapshot) cannot be read right now."""


class Unevaluable(ValueError):
    """The policy cannot evaluate the pod at all (an invalid selector, say): the caller's fault."""


@dataclass(slots=True)
class FilterOutcome:
    """Filter's verdict on the candidates; ``error`` set means no verdict (the pod's cycle fails)."""

    passing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def failure(cls, error: str) -> FilterOutcome:
        return cls(error=error)


@dataclass(frozen=True, slots=True)
class CyclePod:
    """A prioritize call's pod before it is read: a filter on this replica that already scored the
    same pod (same uid and resourceVersion) answers without ``parse`` ever being called."""

    uid: str
    resource_version: str
    parse: Callable[[], PodInfo]
