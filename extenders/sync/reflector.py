"""One kind's list and watch, written into the store: kube's reflector, for one leadership term.

List, write only what differs from the store (deleting what vanished), then watch from the list's
resourceVersion with bookmarks. A 410 Gone (HTTP status or ERROR event) means a fresh relist;
connection errors re-watch from the last applied resourceVersion after a backoff. Events that arrive
together are written as one fenced batch, so the write rate follows Redis round trips, not events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from redis.exceptions import RedisError

from extenders.aio import raise_if_cancelling
from extenders.kube.client import GoneError, KubeApiError, KubeClient
from extenders.kube.meta import describe, metadata
from extenders.quantity import QuantityError
from extenders.sync.kinds import Watched
from extenders.sync.ops import Op
from extenders.sync.store import FencedError, Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

TRANSIENT = (httpx.HTTPError, KubeApiError, RedisError, OSError, ValueError)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delays that grow, are capped, and are jittered so replicas that lost the API server
    together do not come back in step."""

    initial: float = 0.2
    longest: float = 10.0

    def delay(self, failures: int) -> float:
        step = min(self.longest, self.initial * 2.0 ** (failures - 1))
        return float(step * (0.5 + random.random() / 2))


@dataclass(slots=True)
class ResourceStats:
    lists: int = 0
    gone: int = 0
    watches: int = 0
    events: int = 0
    batches: int = 0
    errors: int = 0
    resource_version: str = ""
    last_error: str = ""


@dataclass(slots=True)
class WatcherStats:
    resources: dict[str, ResourceStats] = field(default_factory=dict)
    synced: bool = False

    def of(self, kind: str) -> ResourceStats:
        return self.resources.setdefault(kind, ResourceStats())


class Observer(Protocol):
    """Who else reads a kind's raw objects as they are listed and watched (the errored-pod requeuer)."""

    def listed(self, objects: Sequence[Mapping[str, Any]], keys: set[str]) -> None: ...

    def seen(self, objects: Sequence[Mapping[str, Any]], gone: Sequence[Mapping[str, Any]] = ()) -> None: ...


@dataclass(frozen=True, slots=True)
class ReflectorConfig:
    batch_size: int = 500
    watch_timeout: int = 300
    backoff: Backoff = Backoff()
    min_watch_seconds: float = 1.0  # a watch ending sooner with no event counts as a failure


class Reflector:
    """Keeps one kind's objects in the store until cancelled; raises FencedError when the term is over."""

    def __init__(
        self,
        kind: Watched,
        kube: KubeClient,
        store: Store,
        write: Callable[[list[Op], float | None], Awaitable[None]],
        stats: ResourceStats,
        config: ReflectorConfig,
        telemetry: Telemetry,
        observer: Observer | None = None,
    ) -> None:
        self.kind = kind
        self.kube = kube
        self.store = store
        self.write = write  # a fenced batch write, with when its oldest watch event was read (perf_counter)
        self.stats = stats
        self.config = config
        self.telemetry = telemetry
        self.observer = observer

    async def run(self, on_listed: Callable[[], Awaitable[None]]) -> None:
        """``on_listed`` is awaited after every successful list."""
        stats, name = self.stats, self.kind.resource
        failures = 0
        rv = ""
        while True:
            raise_if_cancelling()
            try:
                if not rv:
                    rv = await self.relist()
                    await on_listed()
                events, started = stats.events, time.monotonic()
                rv = await self.watch(rv)
                if stats.events == events and time.monotonic() - started < self.config.min_watch_seconds:
                    # Ended at once with nothing in it (a proxy or server closing streams): do not
                    # turn that into a hot loop of watch requests.
                    failures += 1
                    delay = self.config.backoff.delay(failures)
                    log.info("%s: watch ended at once with no events; re-watching in %.1fs", name, delay)
                    await asyncio.sleep(delay)
                else:
                    failures = 0
            except GoneError:
                stats.gone += 1
                log.info("%s: resourceVersion %s expired (410); relisting", name, rv)
                rv = ""
            except FencedError:
                raise
            except TRANSIENT as exc:
                failures += 1
                stats.errors += 1
                stats.last_error = repr(exc)
                rv = stats.resource_version  # the last one actually written; "" forces a relist
                delay = self.config.backoff.delay(failures)
                log.warning("%s: %s; retrying in %.1fs", name, exc, delay)
                await asyncio.sleep(delay)

    def _upsert(self, obj: Mapping[str, Any]) -> Op | None:
        """The object's write, or None (logged) when it cannot be converted.

        Any exception, not just the expected parse errors: one malformed object must cost only
        itself, never the watcher (a crash would relist everything, again and again).
        """
        try:
            return self.kind.from_api(obj)
        except (QuantityError, ValueError, TypeError, KeyError) as exc:
            log.warning("%s skipped: %s", describe(self.kind.resource, obj), exc)
        except Exception:
            log.exception("%s skipped: unexpected error converting it", describe(self.kind.resource, obj))
        return None

    def _delete(self, obj: Mapping[str, Any]) -> Op | None:
        try:
            return self.kind.gone(obj)
        except Exception:
            log.exception("%s: delete skipped: malformed object", describe(self.kind.resource, obj))
            return None

    def _key(self, obj: Mapping[str, Any]) -> str | None:
        try:
            return self.kind.key_of(obj)
        except Exception:
            log.exception("%s skipped: no identity", describe(self.kind.resource, obj))
            return None

    async def relist(self) -> str:
        """List everything and write only the difference; returns the list's resourceVersion."""
        stats, kind = self.stats, self.kind
        started = time.perf_counter()
        listing = await self.kube.list(kind.path)
        stats.lists += 1
        listed: set[str] = set()
        ops: list[Op] = []
        for obj in listing.items:
            key = self._key(obj)
            if key is None:
                continue
            listed.add(key)
            op = self._upsert(obj)
            if op is not None:
                ops.append(op)
        stored: set[str] = set()
        for hash_name in kind.stored_hashes:
            stored |= await self.store.hash_keys(hash_name)
        ops.extend(kind.vanished(stored - listed, listing.resource_version))
        for start in range(0, len(ops), self.config.batch_size):
            raise_if_cancelling()
            await self.write(ops[start : start + self.config.batch_size], None)
        if self.observer is not None:
            self.observer.listed(listing.items, listed)
        stats.resource_version = listing.resource_version
        log.info(
            "%s: listed %d, %d stored vanished, in %.2fs (rv %s)",
            kind.resource,
            len(listing.items),
            len(stored - listed),
            time.perf_counter() - started,
            listing.resource_version,
        )
        return listing.resource_version

    async def watch(self, rv: str) -> str:
        """Apply events until the server ends the stream; returns the last resourceVersion written."""
        stats, name, batch_size = self.stats, self.kind.resource, self.config.batch_size
        stats.watches += 1
        # Each event with the time it was read, so the write's lag behind the watch is measured.
        queue: asyncio.Queue[tuple[float, dict[str, Any]] | None] = asyncio.Queue(maxsize=10 * batch_size)

        async def read() -> None:
            try:
                async for event in self.kube.watch(self.kind.path, rv, self.config.watch_timeout):
                    await queue.put((time.perf_counter(), event))
            finally:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

        reader = asyncio.create_task(read(), name=f"watch-read-{name}")
        try:
            while True:
                raise_if_cancelling()
                if queue.empty() and reader.done():
                    break  # ended while the queue was full, so its end marker was dropped
                item = await queue.get()
                if item is None:
                    break
                oldest, event = item
                batch = [event]
                ended = False
                while len(batch) < batch_size and not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        ended = True
                        break
                    batch.append(more[1])
                await self._apply_events(batch, oldest)
                self.telemetry.watch_lag.labels(name).observe(time.perf_counter() - oldest)
                self.telemetry.watch_events.labels(name).inc(len(batch))
                if ended:
                    break
            await asyncio.wait([reader])
            reader.result()  # re-raises GoneError / connection errors from the stream
        finally:
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
        return stats.resource_version

    async def _apply_events(self, events: list[dict[str, Any]], read_at: float) -> None:
        stats, name = self.stats, self.kind.resource
        ops: list[Op] = []
        upserted: list[Mapping[str, Any]] = []
        deleted: list[Mapping[str, Any]] = []
        rv = stats.resource_version
        for event in events:
            obj = event.get("object") if isinstance(event, dict) else None
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata") or {}, dict):
                log.warning("%s: malformed watch event skipped: %.200r", name, event)
                continue
            kind = event.get("type")
            op: Op | None = None
            if kind in ("ADDED", "MODIFIED"):
                op = self._upsert(obj)
                upserted.append(obj)
            elif kind == "DELETED":
                op = self._delete(obj)
                deleted.append(obj)
            elif kind != "BOOKMARK":
                log.warning("%s: unexpected watch event type %r", name, kind)
            if op is not None:
                ops.append(op)
            rv = str(metadata(obj).get("resourceVersion") or rv)
        if ops:
            await self.write(ops, read_at)
        if self.observer is not None:
            self.observer.seen(upserted, deleted)
        stats.events += len(events)
        stats.batches += 1
        stats.resource_version = rv
