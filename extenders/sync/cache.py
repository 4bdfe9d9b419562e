"""Each replica's in-memory copy of the Redis snapshot, caught up incrementally.

``refresh()`` runs before every filter/prioritize call, so the common case must be cheap:
one round trip that returns only the cluster generation when nothing changed, and one
round trip returning just the changed nodes, pending pods and records of every watched kind
(``extenders.sync.kinds``) when it did.
A full (pipelined, batched) load happens at start, when this copy is older than the
tombstone floor, or when more changed than one reply should carry.

Snapshots handed out are never mutated afterwards (a change builds a new ``Snapshot``
sharing the unchanged NodeInfo objects), so a request may keep using the one it got.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from hashlib import blake2b
from typing import TypeVar, cast

from extenders.features import NEWEST, Features
from extenders.model import NodeInfo, PodInfo
from extenders.snapshot import Snapshot, patch_nominated
from extenders.sync import kinds
from extenders.sync.ops import PENDING
from extenders.sync.records import POD, decode_node_hash
from extenders.sync.store import CatchUp, Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

T = TypeVar("T")

GC_FREEZE_MIN_PODS = 1000  # a full load of at least this many pods is moved out of the cyclic GC's sight


@dataclass(slots=True)
class CacheStats:
    refreshes: int = 0
    unchanged: int = 0
    deltas: int = 0
    full_loads: int = 0
    last_full_load_seconds: float = 0.0


def _merge(
    old: Mapping[str, T], changes: list[tuple[str, bytes | None]] | None, decode: Callable[[str, bytes], T]
) -> Mapping[str, T]:
    if not changes:
        return old
    out = dict(old)
    for key, raw in changes:
        if raw is None:
            out.pop(key, None)
        else:
            out[key] = decode(key, raw)
    return out


def _pod(_key: str, raw: bytes) -> PodInfo:
    return POD.loads(raw)


class SnapshotCache:
    """A replica's snapshot; concurrent ``refresh()`` calls share a refresh that reads Redis after they arrived."""

    def __init__(
        self, store: Store, max_delta_items: int = 2000, batch: int = 256, telemetry: Telemetry | None = None
    ) -> None:
        self.store = store
        self.telemetry = telemetry or Telemetry()
        self.max_delta_items = max_delta_items
        self.batch = batch
        self.stats = CacheStats()
        self._features = NEWEST
        self._snapshot = Snapshot()
        self._loaded = False
        self._running: asyncio.Future[Snapshot] | None = None  # begun: may have read Redis already
        self._next: asyncio.Future[Snapshot] | None = None  # not begun: whoever arrives now may share it
        self._read_at = -math.inf  # time.monotonic() when the read behind ``_snapshot`` began
        self._digests: dict[str, dict[str, bytes]] = {}  # node -> pod uid -> digest of its stored record

    @property
    def loaded(self) -> bool:
        """True once a full load finished: the snapshot reflects the store."""
        return self._loaded

    @property
    def current(self) -> Snapshot:
        """The last snapshot, without asking Redis (may be stale)."""
        return self._snapshot

    def held(self, max_age: float) -> Snapshot | None:
        """The last snapshot when the Redis read behind it began at most ``max_age`` seconds ago, else None
        (always None for a ``max_age`` of 0: the caller reads)."""
        if max_age > 0 and self._loaded and time.monotonic() - self._read_at <= max_age:
            return self._snapshot
        return None

    def follow(self, features: Features) -> None:
        """Hand out snapshots that carry ``features`` (the cluster's release) from now on."""
        if features != self._features:
            self._features = features
            self._snapshot = replace(self._snapshot, features=features)

    async def refresh(self) -> Snapshot:
        """The snapshot as read from Redis after this call arrived, shared with every caller arriving
        before that read.

        A refresh already under way may have read Redis before a change this caller has seen the
        effect of (a bind answered by another replica), so such a caller waits for the next refresh,
        which every caller arriving meanwhile shares. Refreshes never overlap, so deltas apply in order.
        """
        return await asyncio.shield(self._queued())

    def refresh_soon(self, older_than: float = 0.0) -> None:
        """Start a refresh nobody waits for, so that a call arriving soon finds a recent snapshot in
        ``held``: none when one is under way or queued already, or when the last read began less than
        ``older_than`` seconds ago. Its errors are the next caller's to meet."""
        if self._running is not None or self._next is not None:
            return
        if time.monotonic() - self._read_at < older_than:
            return
        self._queued()

    def _queued(self) -> asyncio.Future[Snapshot]:
        queued = self._next
        if queued is None:
            queued = asyncio.ensure_future(self._after(self._running))
            self._next = queued
            queued.add_done_callback(self._done)
        return queued

    async def _after(self, running: asyncio.Future[Snapshot] | None) -> Snapshot:
        if running is not None:
            await asyncio.wait((running,))
        me = asyncio.current_task()
        # From here on this refresh may read Redis: callers arriving now need the next one.
        if self._next is me:
            self._next = None
        self._running = me
        return await self._refresh()

    def _done(self, fut: asyncio.Future[Snapshot]) -> None:
        # Also when cancelled before it began (at shutdown), so no later caller awaits a dead refresh.
        if self._next is fut:
            self._next = None
        if self._running is fut:
            self._running = None
        if not fut.cancelled():
            fut.exception()  # retrieved, so an error nobody awaited is not logged as lost

    async def _refresh(self) -> Snapshot:
        self.stats.refreshes += 1
        if not self._loaded:
            return await self._full_load()
        started = time.perf_counter()
        read_at = time.monotonic()
        delta = await self.store.catch_up(self._snapshot.generation, self.max_delta_items)
        if delta.reload:
            return await self._full_load()
        if not delta.changed:
            self._read_at = read_at
            self.stats.unchanged += 1
            return self._snapshot
        self.stats.deltas += 1
        self._snapshot = self._apply(self._snapshot, delta)
        self._read_at = read_at
        self.telemetry.snapshot_refresh.labels("incremental").observe(time.perf_counter() - started)
        return self._snapshot

    def _build_node(
        self, name: str, gen: int, rv: str, fields: dict[str, bytes], previous: NodeInfo | None
    ) -> NodeInfo:
        """A NodeInfo from its Redis hash, reusing the previous PodInfo of every record whose bytes are unchanged.

        A node's hash is fetched whole when anything on it changed; parsing only the records that
        did change keeps a catch-up proportional to the change, not to the pods on the node.
        """
        old_digests = self._digests.get(name, {}) if previous is not None else {}
        digests: dict[str, bytes] = {}

        def decode_pod(uid: str, raw: bytes) -> PodInfo:
            digest = blake2b(raw, digest_size=16).digest()
            digests[uid] = digest
            reused = previous.pods.get(uid) if previous is not None and old_digests.get(uid) == digest else None
            return reused if reused is not None else POD.loads(raw)

        facts, pods = decode_node_hash(fields, rv, decode_pod)
        self._digests[name] = digests
        return NodeInfo.build(name, facts, pods.values(), gen)

    def _apply(self, old: Snapshot, delta: CatchUp) -> Snapshot:
        nodes = old.nodes
        changed: list[str] = []
        if delta.nodes:
            nodes = dict(old.nodes)
            for name, gen, rv, fields in delta.nodes:
                changed.append(name)
                if not fields:
                    nodes.pop(name, None)
                    self._digests.pop(name, None)
                    continue
                nodes[name] = self._build_node(name, gen, rv, fields, old.nodes.get(name))
        pending_changes = delta.of(PENDING)
        pending = cast(dict[str, PodInfo], _merge(old.pending, pending_changes, _pod))  # a dict in, a dict out
        nominated = old.nominated_seed
        if nominated is not None and pending_changes:
            nominated = patch_nominated(nominated, old.pending, pending, (uid for uid, _raw in pending_changes))
        objects = {
            kind.attr: _merge(old.objects.get(kind.attr, {}), delta.of(kind.hash), kind.decode) for kind in kinds.KINDS
        }
        return Snapshot(
            nodes=nodes,
            pending=pending,
            nominated_seed=nominated,
            objects=objects,
            generation=delta.generation,
            features=self._features,
            sealed=True,
            summary_seed=old.seed(),  # patched for the changed nodes only, as UpdateSnapshot does
            node_changes=old.changes_since_seed(changed),
        )

    async def _full_load(self) -> Snapshot:
        """Read everything (not atomic), then one atomic catch-up from the generation read first.

        Every node changed while the batches were read has a generation above that first
        reading, so the catch-up replaces it with its state at one instant: the result is a
        consistent snapshot.
        """
        started = time.perf_counter()
        store = self.store
        for _attempt in range(5):
            gen0, index = await store.node_index()
            rvs = {k: v.decode() for k, v in (await store.hash_all("noderv")).items()}
            names = list(index)
            nodes: dict[str, NodeInfo] = {}
            self._digests = {}
            for start in range(0, len(names), self.batch):
                chunk = names[start : start + self.batch]
                hashes = await store.node_hashes(chunk, batch=self.batch)
                for name in chunk:
                    fields = hashes[name]
                    if fields:
                        nodes[name] = self._build_node(name, index[name], rvs.get(name, ""), fields, None)
            objects = {
                kind.attr: {k: kind.decode(k, v) for k, v in (await store.hash_all(kind.hash)).items()}
                for kind in kinds.KINDS
            }
            base = Snapshot(
                nodes=nodes,
                pending={k: _pod(k, v) for k, v in (await store.hash_all(PENDING)).items()},
                objects=objects,
                generation=gen0,
                features=self._features,
                sealed=True,
            )
            read_at = time.monotonic()
            delta = await store.catch_up(gen0, max(self.max_delta_items, len(names) + 1000))
            if delta.reload:
                log.info("snapshot changed too much during a full load; loading again")
                continue
            snap = self._apply(base, delta) if delta.changed else base
            self._snapshot = snap
            self._read_at = read_at
            self._loaded = True
            self.stats.full_loads += 1
            self.stats.last_full_load_seconds = time.perf_counter() - started
            self.telemetry.snapshot_refresh.labels("full").observe(self.stats.last_full_load_seconds)
            # A 100k-pod snapshot is millions of objects; a full cyclic GC pass over them stalls a
            # request for 100-300 ms. Move them out of the collector's sight. Unfreezing first lets
            # this collection reclaim cycles frozen by an earlier load (request frames, tasks). A small
            # snapshot gains nothing from it worth the full collection it costs.
            if sum(len(info.pods) for info in snap.nodes.values()) + len(snap.pending) >= GC_FREEZE_MIN_PODS:
                gc.unfreeze()
                gc.collect()
                gc.freeze()
            return snap
        raise RuntimeError("could not load a consistent snapshot: the store kept changing too much")
