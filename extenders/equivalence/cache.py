"""Per-replica memory of node-local verdicts and raw scores, one ``ClassMemo`` per equivalence class.

Bounded: at most ``max_classes`` classes and ``max_entries`` entries in all (the least recently used
classes go first), and none unused for ``ttl_seconds``. A class holds at most one entry per node name
for the filter and for each cached scorer.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from extenders.equivalence.classes import equivalence_class
from extenders.features import NEWEST, Features
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import Verdict

if TYPE_CHECKING:
    from extenders.snapshot import Snapshot

VERBS = ("filter", "prioritize")


@dataclass(slots=True, frozen=True)
class CacheConfig:
    enabled: bool = True
    max_classes: int = 256
    ttl_seconds: float = 300.0
    max_entries: int = 1_000_000  # about 100 bytes each


# (the node's fingerprints, how many of them the verdict rests on, the first failing local step or
# -1, its verdict): see extenders.engine.filter_cache
FilterEntry = tuple[tuple[Any, ...], int, int, Verdict | None]
# (the node's fingerprints of the scorer's families, its raw score): see extenders.engine.score_cache
# A node's fingerprints and the raw scores of a group of scorers reading the same node parts.
ScoreEntry = tuple[tuple[Any, ...], tuple[float, ...]]
# An entry computed here, for the shared tier to write: (``FILTER`` or the scorer group's key, the
# node's name, the node it was computed on, the families it rests on, what to store).
Computed = tuple[str, str, NodeInfo, tuple[str, ...], Any]
FILTER = "filter"


class ClassMemo:
    """One class's node-local verdicts, and raw scores per scorer, by node name.

    ``admitted`` turns true when the class is seen a second time by the same verb: a class seen
    once (a pod unlike any other) is not worth storing 400 entries for, so a stream of
    all-different pods pays little more than the digest.
    """

    __slots__ = (
        "admitted",
        "answered",
        "answered_for",
        "answers",
        "fetched",
        "filter",
        "held",
        "held_at",
        "held_layout",
        "key",
        "outbox",
        "outcome",
        "score_held",
        "scores",
        "seen",
        "shared",
        "unresolvable",
        "used",
    )

    def __init__(self, key: str, now: float) -> None:
        self.key = key
        self.used = now
        self.admitted = False
        self.seen: dict[str, int] = {}
        self.filter: dict[str, FilterEntry] = {}
        # The filter's node-local verdict by node name, for one layout (``held_layout``: its
        # signature), and the ``NodeInfo.version`` it was judged at: no two node states share a
        # version, so an equal one means the same verdict, told without reading more of the node
        # (see extenders.engine.filter_cache).
        self.held: dict[str, int] = {}
        self.outcome: dict[str, Verdict | None] = {}
        # With steps that read other nodes in the layout: where the node-local steps failed (-1:
        # nowhere), which says which of those steps still run.
        self.held_at: dict[str, int] = {}
        self.held_layout = ""
        # Whole filter verdicts by node name on one snapshot (``answered``: a weak reference to it;
        # ``answered_for``: what of the pod outside the class they rest on), see extenders.engine.answers:
        # None (passes) or the reason it fails, and the names that fail unresolvably.
        self.answered: weakref.ref[Snapshot] | None = None
        self.answered_for: object = None
        self.answers: dict[str, str | None] = {}
        self.unresolvable: set[str] = set()
        self.scores: dict[str, dict[str, ScoreEntry]] = {}  # scorer group -> node name -> entry
        # Scorer group -> node name -> the NodeInfo.version its entry in ``scores`` was last found valid at.
        self.score_held: dict[str, dict[str, int]] = {}
        # The shared tier's part (extenders.equivalence.shared): entries another replica stored, as
        # bytes by ``FILTER`` or scorer group, then node name, taken (and checked) on a local miss;
        # the verbs already fetched; what this replica computed and has not handed over yet (None:
        # nothing to hand over, the tier is off).
        self.shared: dict[str, dict[str, bytes]] = {}
        self.fetched: set[str] = set()
        self.outbox: list[Computed] | None = None

    def entries(self) -> int:
        return (
            len(self.filter)
            + len(self.outcome)
            + len(self.answers)
            + sum(len(scores) for scores in self.scores.values())
            + sum(len(blobs) for blobs in self.shared.values())
        )

    def visit(self, verb: str, now: float) -> None:
        self.used = now
        seen = self.seen.get(verb, 0) + 1
        self.seen[verb] = seen
        self.admitted = seen > 1


@dataclass(slots=True)
class VerbStats:
    recalled: int = 0  # requests answered whole from the class's verdicts on the same snapshot
    hits: int = 0  # requests that reused every node's verdict
    partial: int = 0  # requests that reused some
    misses: int = 0  # requests that reused none
    nodes_reused: int = 0
    nodes_computed: int = 0
    nodes_shared: int = 0  # of the reused, those another replica computed (through Redis)

    def document(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class EquivalenceCache:
    config: CacheConfig = field(default_factory=CacheConfig)
    clock: Callable[[], float] = time.monotonic
    evictions: int = 0
    verbs: dict[str, VerbStats] = field(default_factory=lambda: {verb: VerbStats() for verb in VERBS})
    _classes: OrderedDict[str, ClassMemo] = field(default_factory=OrderedDict)
    # Entries held, at most: the exact count walks every class, so it runs only when this bound
    # could exceed ``max_entries``.
    _stored_bound: int = 0

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def memo(
        self, pod: PodInfo, verb: str = "filter", key: str | None = None, features: Features = NEWEST
    ) -> ClassMemo | None:
        """The memo of ``pod``'s class under ``features`` (the snapshot's), admitted for ``verb`` once
        that verb has seen the class before; None when the cache is off. ``key``: the class, when the
        caller knows it (it is not checked)."""
        if not self.config.enabled:
            return None
        now = self.clock()
        self._expire(now)
        key = key or equivalence_class(pod, features)
        memo = self._classes.get(key)
        if memo is None:
            memo = ClassMemo(key, now)
            self._classes[key] = memo
            while len(self._classes) > self.config.max_classes:
                self._classes.popitem(last=False)
                self.evictions += 1
        else:
            self._classes.move_to_end(key)
        memo.visit(verb, now)
        return memo

    def _expire(self, now: float) -> None:
        limit = now - self.config.ttl_seconds
        classes = self._classes
        while classes:
            oldest = next(iter(classes.values()))
            if oldest.used >= limit:
                return
            classes.popitem(last=False)
            self.evictions += 1

    def count(self, verb: str, reused: int, computed: int, shared: int = 0, recalled: bool = False) -> None:
        """Record one request's reuse (``shared``: how many of ``reused`` came from the shared tier;
        ``recalled``: the whole answer was the class's on the same snapshot); ``computed`` entries may
        have been stored, so the entry cap is checked when they could take the cache over it."""
        self._stored_bound += computed
        if self._stored_bound > self.config.max_entries:
            self._shrink()
        stats = self.verbs[verb]
        stats.nodes_reused += reused
        stats.nodes_computed += computed
        stats.nodes_shared += shared
        if recalled:
            stats.recalled += 1
        elif computed == 0 and reused:
            stats.hits += 1
        elif reused:
            stats.partial += 1
        else:
            stats.misses += 1

    def hold(self, entries: int) -> None:
        """Account for ``entries`` a memo took in from the shared tier (the entry cap counts them)."""
        self._stored_bound += entries
        if self._stored_bound > self.config.max_entries:
            self._shrink()

    def _shrink(self) -> None:
        """Drop the least recently used classes until the entries fit ``max_entries`` (the class in
        use, the most recent, stays even alone over the cap: it is what the next call reads)."""
        total = self.entries()
        classes = self._classes
        while total > self.config.max_entries and len(classes) > 1:
            _key, oldest = classes.popitem(last=False)
            total -= oldest.entries()
            self.evictions += 1
        self._stored_bound = total

    def clear(self) -> None:
        self._classes.clear()
        self._stored_bound = 0

    @property
    def classes(self) -> int:
        return len(self._classes)

    def entries(self) -> int:
        return sum(memo.entries() for memo in self._classes.values())

    def document(self) -> dict[str, Any]:
        """``GET /v1/cache/stats``."""
        return {
            "enabled": self.config.enabled,
            "classes": self.classes,
            "entries": self.entries(),
            "max_classes": self.config.max_classes,
            "max_entries": self.config.max_entries,
            "ttl_seconds": self.config.ttl_seconds,
            "evictions": self.evictions,
            "verbs": {verb: stats.document() for verb, stats in self.verbs.items()},
        }
