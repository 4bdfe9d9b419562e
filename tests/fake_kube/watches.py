"""The fake's watch side: committed events, open watches and each resource's table of objects and history."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from .errors import Json
from .objects import Key
from .resources import ResourceType
from .selectors import Matcher


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Json  # the new state (for DELETED: the last state, with the deletion's resourceVersion)
    prev: Json | None  # the state before, so a selector watch can turn MODIFIED into ADDED/DELETED


class Watch:
    """One open watch: its filter and the queue its HTTP stream drains (None = close the stream)."""

    def __init__(self, rtype: ResourceType, namespace: str | None, match: Matcher) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.match = match
        self.queue: asyncio.Queue[tuple[str, Json] | None] = asyncio.Queue()

    def visible(self, obj: Json | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.match(obj)

    def translate(self, ev: Event) -> tuple[str, Json] | None:
        """What this watcher sees of an event: like the real cache, objects entering or leaving the
        selector's view arrive as ADDED / DELETED."""
        now_ok = self.visible(ev.obj)
        if ev.type in ("ADDED", "DELETED"):
            return (ev.type, ev.obj) if now_ok else None
        was_ok = self.visible(ev.prev)
        if now_ok:
            return ("MODIFIED" if was_ok else "ADDED", ev.obj)
        return ("DELETED", ev.obj) if was_ok else None


@dataclass
class Table:
    rtype: ResourceType
    objects: dict[Key, Json] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=deque)
    compacted_rv: int = 0  # a watch needs every event after its RV: older RVs than this get 410
    watches: set[Watch] = field(default_factory=set)
