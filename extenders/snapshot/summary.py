"""Snapshot-wide facts that per-pod prepare steps would otherwise walk every node for, kept per node
table and patched for the nodes that change."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, contains, is_not, ne
from typing import Any, TypeVar

from extenders.model import LabelKey, NodeFacts, NodeInfo
from extenders.snapshot.patching import NodeValue, label_test, patch_column, patch_names, patch_sizes
from extenders.snapshot.tally import NodeContribution, Tally

T = TypeVar("T")
NodeTest = Callable[[NodeInfo], bool]
_VERSION = attrgetter("version")
_FACTS = attrgetter("node")
_IMAGES = attrgetter("images")
_MAX_KEYS = 1024  # cached label keys / images per summary before starting over
_DERIVED_SOURCES = 2  # sources kept per key of ``ClusterSummary.derived``
_PATCH_LIMIT = 256  # more changed nodes than this: summarise from scratch (lazily) instead
# Tallies kept per summary; each is patched on every derivation, so the least recently used goes first
# beyond this (it is rebuilt by a walk if asked for again).
_MAX_TALLIES = 64


def _has_anti(info: NodeInfo) -> bool:
    return bool(info.pods_with_required_anti_affinity)


def _has_affinity(info: NodeInfo) -> bool:
    return bool(info.pods_with_affinity)


class ClusterSummary:
    """Aggregates over one node table; immutable once shared except for lazy fills.

    Which nodes hold pods with (anti-)affinity terms, which hold a pod with a given indexed
    label, how many nodes hold an image and its size: kube-scheduler keeps such lists in its
    snapshot. On 5000 nodes every such walk costs a millisecond or more (each node is a few cold objects),
    so a summary is kept per node table and reused by every call that sees the same table.
    Each snapshot owns its summary (``Snapshot.summary``); the next snapshot, which shares the
    unchanged NodeInfo objects (as ``SnapshotCache`` builds it), gets it patched for the nodes
    that differ, as kube-scheduler's UpdateSnapshot does. Each aggregate is computed lazily, on
    first use.

    Reuse is always checked: the node table is compared by NodeInfo identity, each
    NodeInfo's ``version`` (bumped by add_pod/remove_pod) and its NodeFacts object, so a table
    changed in place is noticed. NodeFacts are treated as values (replaced, never edited):
    image counts read them. Aggregates hold node *names*; callers map them back through the
    snapshot, so patching never has to touch entries of unchanged nodes. Values plug-ins make from
    a column or from another of the snapshot's tables (``derived``) are kept here too, rather than in
    module globals that two snapshots in use at once would keep overwriting.
    """

    __slots__ = (
        "_columns",
        "_derived",
        "_image_sizes",
        "_images",
        "_labels",
        "_positions",
        "_sets",
        "_tallies",
        "facts",
        "infos",
        "total",
        "versions",
    )

    def __init__(
        self, infos: list[NodeInfo], versions: list[int], facts: list[NodeFacts | None], total: int | None = None
    ) -> None:
        self.infos = infos
        self.versions = versions
        self.facts = facts
        # nodes with a node object
        self.total = sum(map(is_not, facts, repeat(None))) if total is None else total
        self._positions: dict[str, int] | None = None  # node name -> index in ``infos``, when asked
        self._labels: dict[LabelKey, frozenset[str]] = {}
        self._images: dict[str, int] = {}
        self._image_sizes: dict[str, tuple[str, int]] = {}  # image -> (first holder by name, its size)
        self._sets: dict[Hashable, tuple[NodeTest, frozenset[str]]] = {}  # see names_where
        self._columns: dict[Hashable, tuple[NodeValue, dict[str, Any]]] = {}  # see column
        # See tally: each with the names of the nodes changed since it was last brought up to date.
        self._tallies: dict[Hashable, tuple[Tally, frozenset[str]]] = {}
        # See derived: key -> ((source, value), ...), the most recently built first.
        self._derived: dict[Hashable, tuple[tuple[object, Any], ...]] = {}

    def positions(self) -> dict[str, int]:
        """Node name -> its index in ``infos`` (shared by summaries derived through ``with_changes``)."""
        if self._positions is None:
            self._positions = {info.name: i for i, info in enumerate(self.infos)}
        return self._positions

    def with_changes(self, nodes: Mapping[str, NodeInfo], changed: Iterable[str]) -> ClusterSummary | None:
        """The summary of ``nodes``, which differ from this summary's table in the nodes named in ``changed``
        only (every other one the very object, unchanged, that this summary holds): only those are
        looked at. None when a named node was added or removed (then ``summarise`` compares the tables)."""
        if len(nodes) != len(self.infos):
            return None
        positions = self.positions()
        infos, versions, facts = list(self.infos), list(self.versions), list(self.facts)
        total = self.total
        indexes: list[int] = []
        for name in changed:
            i = positions.get(name)
            info = nodes.get(name)
            if i is None or info is None:
                return None
            total += (info.node is not None) - (facts[i] is not None)
            infos[i], versions[i], facts[i] = info, info.version, info.node
            indexes.append(i)
        derived = self.derive(infos, versions, facts, indexes, total)
        derived._positions = positions
        return derived

    def same_table(self, infos: list[NodeInfo], versions: list[int], facts: list[NodeFacts | None]) -> bool:
        # Identity only: ``==`` on lists of dataclasses would compare them field by field.
        return _same_objects(infos, self.infos) and versions == self.versions and _same_objects(facts, self.facts)

    # ------------------------------------------------------------ aggregates
    def names_with_label(self, key: LabelKey) -> frozenset[str]:
        """Nodes holding a pod with this ``label_key`` (terminating pods included)."""
        found = self._labels.get(key)
        if found is None:
            found = frozenset(i.name for i in self.infos if key in i.pods_by_label)
            _store(self._labels, key, found)
        return found

    def names_with_any_label(self, keys: Iterable[LabelKey]) -> frozenset[str]:
        """Nodes holding a pod with at least one of ``keys``."""
        found: frozenset[str] = frozenset()
        for key in keys:
            found = found | self.names_with_label(key) if found else self.names_with_label(key)
        return found

    def names_with_anti_affinity_pods(self) -> frozenset[str]:
        return self.names_where("anti", _has_anti)

    def names_with_affinity_pods(self) -> frozenset[str]:
        return self.names_where("affinity", _has_affinity)

    def names_where(self, key: Hashable, test: NodeTest) -> frozenset[str]:
        """Nodes passing ``test``, a pure function of a NodeInfo's pods, cached under ``key``.

        The same ``key`` must always come with the same test: derived summaries re-run it
        on changed nodes only.
        """
        entry = self._sets.get(key)
        if entry is None:
            entry = (test, frozenset(i.name for i in self.infos if test(i)))
            if len(self._sets) >= _MAX_KEYS:
                self._sets.clear()
            self._sets[key] = entry
        return entry[1]

    def column(self, key: Hashable, extract: Callable[[NodeInfo], T | None]) -> dict[str, T]:
        """Node name -> ``extract(node)`` for every node where it is not None, cached under ``key``.

        For per-candidate loops: one lookup in a dict built in one sweep (compact, warm in
        cache) instead of reading each candidate's scattered objects. Like ``names_where``,
        ``extract`` must be a pure function of a NodeInfo (its pods and node facts), and the
        same ``key`` must always come with the same ``extract``.
        """
        entry = self._columns.get(key)
        if entry is None:
            values: dict[str, Any] = {}
            for info in self.infos:
                value = extract(info)
                if value is not None:
                    values[info.name] = value
            entry = (extract, values)
            if len(self._columns) >= _MAX_KEYS:
                self._columns.clear()
            self._columns[key] = entry
        found: dict[str, T] = entry[1]
        return found

    def tally(self, key: Hashable, contribute: NodeContribution, among: Iterable[NodeInfo] | None = None) -> Tally:
        """Counts summed over every node's ``contribute(node)`` (see ``Tally``), cached under ``key``;
        ``among``: the only nodes that can contribute anything, all a first count has to visit.

        Derived summaries hand a tally down with the names of the nodes that changed, and the first
        use subtracts those nodes' old parts and adds their new ones: a count over the whole cluster
        costs the changed nodes only, and only for the tallies still in use. ``contribute`` must be
        a pure function of a NodeInfo, always the same for one ``key``.
        """
        tallies = self._tallies
        entry = tallies.pop(key, None)
        if entry is not None:
            found, stale = entry
            if stale:
                positions = self.positions()
                found = found.patched(self.infos[positions[name]] for name in stale)
        else:
            found = Tally(contribute)
            for info in self.infos if among is None else among:
                found.add(info.name, contribute(info))
            while len(tallies) >= _MAX_TALLIES:
                del tallies[next(iter(tallies))]
        tallies[key] = (found, frozenset())  # the most recently used last: the oldest goes first
        return found

    def derived(self, key: Hashable, source: object, build: Callable[[], T]) -> T:
        """``build()``, a value made from ``source`` alone, kept under ``key`` while ``source`` is the
        same object: a column of this summary, or another table of the snapshot (which the replica
        cache keeps while it is unchanged).

        Summaries derived from this one start with its values, each checked against its source
        again, so a value outlives node changes that leave its source alone. The last two sources
        are kept per key: two snapshots in use at once (explain or preempt on an older one) may
        share this summary yet hold different tables.
        """
        entries = self._derived.get(key, ())
        for held, value in entries:
            if held is source:
                found: T = value
                return found
        built = build()
        if len(self._derived) >= _MAX_KEYS:
            self._derived.clear()
        self._derived[key] = ((source, built), *entries[: _DERIVED_SOURCES - 1])
        return built

    def image_nodes(self, image: str) -> int:
        """How many nodes report ``image`` (a normalised name) among their images."""
        found = self._images.get(image)
        if found is None:
            found = sum(map(contains, map(_IMAGES, filter(None, self.facts)), repeat(image)))
            _store(self._images, image, found)
        return found

    def image_size(self, image: str) -> int:
        """The size kube-scheduler's image state gives ``image``, on every node that holds it (0 if none).

        kube-scheduler keeps one size per image name: the one reported by the first node to list
        that name, until no node lists it any more. Which node came first depends on event
        history; taken here as the first by name, the order a freshly started kube-scheduler
        lists nodes in.
        """
        found = self._image_sizes.get(image)
        if found is None:
            first, kept = "", 0
            for facts in filter(None, self.facts):
                size = facts.images.get(image)
                if size is not None and (not first or facts.name < first):
                    first, kept = facts.name, size
            found = (first, kept)
            _store(self._image_sizes, image, found)
        return found[1]

    # ------------------------------------------------------------ derivation
    def derive(
        self,
        infos: list[NodeInfo],
        versions: list[int],
        facts: list[NodeFacts | None],
        indexes: Iterable[int] | None = None,
        total: int | None = None,
    ) -> ClusterSummary:
        """The summary of a table that may differ from this one in a few nodes: those at ``indexes`` when
        the caller knows them (``with_changes``), else found by comparing the tables."""
        fresh = ClusterSummary(infos, versions, facts, total)
        fresh._derived = dict(list(self._derived.items()))  # each checked against its source on use
        old_infos = self.infos
        if len(infos) != len(old_infos):
            return fresh
        if indexes is not None:
            changed = set(indexes)
        else:
            positions = range(len(infos))
            changed = set(compress(positions, map(is_not, infos, old_infos)))
            changed.update(compress(positions, map(ne, versions, self.versions)))
            changed.update(compress(positions, map(is_not, facts, self.facts)))
        if len(changed) > _PATCH_LIMIT or any(infos[i].name != old_infos[i].name for i in changed):
            return fresh
        pairs = [(infos[i], self.facts[i], facts[i]) for i in changed]
        # list(...) snapshots the lazily filled dicts, which another thread may be filling.
        fresh._labels = {key: patch_names(names, pairs, label_test(key)) for key, names in list(self._labels.items())}
        fresh._sets = {key: (test, patch_names(names, pairs, test)) for key, (test, names) in list(self._sets.items())}
        fresh._columns = {
            key: (extract, patch_column(values, pairs, extract))
            for key, (extract, values) in list(self._columns.items())
        }
        names = frozenset(infos[i].name for i in changed)
        fresh._tallies = {
            key: (tally, stale | names)
            for key, (tally, stale) in list(self._tallies.items())
            if len(stale) + len(names) <= _PATCH_LIMIT
        }
        images = dict(list(self._images.items()))
        for image in images:
            for _new, old_facts, new_facts in pairs:
                had = old_facts is not None and image in old_facts.images
                has = new_facts is not None and image in new_facts.images
                images[image] += has - had
        fresh._images = images
        fresh._image_sizes = patch_sizes(dict(list(self._image_sizes.items())), pairs)
        return fresh


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and not any(map(is_not, a, b))


def _store(cache: dict[str, T], key: str, value: T) -> None:
    if len(cache) >= _MAX_KEYS:
        cache.clear()
    cache[key] = value


def summarise(nodes: Iterable[NodeInfo], seed: ClusterSummary | None) -> ClusterSummary:
    """The summary of a node table: ``seed`` itself when the table is unchanged (same NodeInfo
    objects, versions and facts), else ``seed`` patched for the nodes that differ, else a new one."""
    infos = list(nodes)
    versions = list(map(_VERSION, infos))
    facts: list[NodeFacts | None] = list(map(_FACTS, infos))
    if seed is None:
        return ClusterSummary(infos, versions, facts)
    if seed.same_table(infos, versions, facts):
        return seed
    return seed.derive(infos, versions, facts)


def infos_named(nodes: Mapping[str, NodeInfo], names: Iterable[str]) -> list[NodeInfo]:
    """The table's NodeInfo for each name (every name comes from a summary of this table)."""
    return [nodes[name] for name in names]
