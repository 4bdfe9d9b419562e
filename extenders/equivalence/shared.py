"""The equivalence cache's shared tier: entries one replica computed, in Redis, for the others.

A replica meeting a class it holds nothing for (it just started, scaled out, or evicted the class)
takes the verdicts and raw scores another replica stored, in one HMGET of the candidates, instead of
evaluating every node. A warm class costs nothing here: the replica's own memory answers, and what
it computes is written behind the answer, in batches. Each entry carries the digests of the node
parts it rests on and is used only where they are unchanged (``packing``), so the tier cannot make
an answer stale; it is scoped by the code's version and the policy, so replicas that could judge
differently never share.

Keys, under ``P:eq:{scope}``: ``:c:{class}`` hash ``{FILTER or scorer group}\\n{node}`` -> entry;
``:classes`` zset class -> time of its last write (Redis clock, ms), at most ``max_classes``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from hashlib import blake2b
from importlib import metadata
from typing import Any

import orjson
import redis.asyncio as aredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from extenders import lua
from extenders.aio import cancel_and_wait, raise_if_cancelling
from extenders.equivalence.cache import FILTER, ClassMemo, Computed, EquivalenceCache
from extenders.equivalence.fingerprints import digests
from extenders.equivalence.groups import score_groups
from extenders.equivalence.packing import pack_filter, pack_scores
from extenders.policy import Policy

log = logging.getLogger(__name__)

# Bumped when the bytes of an entry change meaning: replicas of different formats do not share.
FORMAT = 1


@dataclass(slots=True, frozen=True)
class SharedConfig:
    enabled: bool = True
    max_classes: int = 256
    ttl_seconds: float = 300.0
    refresh_seconds: float = 1.0  # how often the list of classes in Redis is read
    flush_seconds: float = 0.05  # computed entries wait this long, to be written in one batch
    max_pending: int = 200_000  # entries waiting to be written, at most (more are dropped)


@dataclass(slots=True)
class SharedStats:
    fetches: int = 0  # HMGETs of a class new to this replica
    fetched: int = 0  # entries they brought (each is checked before use)
    written: int = 0
    dropped: int = 0  # computed entries not written: too many waiting, or Redis failed
    errors: int = 0

    def document(self) -> dict[str, int]:
        return asdict(self)


def scope(policy: Policy) -> str:
    """What replicas must agree on to share entries: the format, the code's version, the policy."""
    try:
        version = metadata.version("kube-gang-extender")
    except metadata.PackageNotFoundError:
        version = "unknown"
    text = orjson.dumps([FORMAT, version, policy.model_dump(mode="json")], option=orjson.OPT_SORT_KEYS)
    return blake2b(text, digest_size=8).hexdigest()


@dataclass
class SharedTier:
    """One replica's side of the shared tier. ``prepare`` before the engine runs, ``collect`` after;
    ``start`` runs the writer and the reader of the class list."""

    redis: aredis.Redis
    prefix: str  # the store's key prefix
    policy: Policy
    cache: EquivalenceCache
    config: SharedConfig = field(default_factory=SharedConfig)
    stats: SharedStats = field(default_factory=SharedStats)
    _known: frozenset[str] = frozenset()  # classes Redis holds entries for (read every refresh_seconds)
    _pending: dict[str, list[Computed]] = field(default_factory=dict)  # class -> computed entries
    _waiting: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    base: str = field(init=False)  # the tier's key prefix: the store's, then the scope
    _groups: list[str] = field(init=False)  # what a prioritize fetch asks for
    _store: AsyncScript = field(init=False)

    def __post_init__(self) -> None:
        self.base = f"{self.prefix}:eq:{scope(self.policy)}"
        self._groups = score_groups(self.policy)
        self._store = lua.register(self.redis, ["eq_store"])["eq_store"]

    @property
    def enabled(self) -> bool:
        return self.config.enabled and self.cache.enabled

    def class_key(self, key: str) -> str:
        """The Redis hash of the class whose digest is ``key``."""
        return f"{self.base}:c:{key}"

    # ------------------------------------------------------------------ the request path
    async def prepare(self, memo: ClassMemo, verb: str, names: Sequence[str]) -> None:
        """Let the engine hand over what it computes; for a class this replica holds nothing of and
        Redis has, fetch the candidates' entries first (one round trip). A failed fetch only costs
        the reuse: the engine computes."""
        if memo.outbox is None:
            memo.outbox = []
        if verb in memo.fetched or memo.key not in self._known or not names:
            return
        wheres = [FILTER] if verb == FILTER else self._groups
        if not wheres or (memo.filter if verb == FILTER else any(memo.scores.values())):
            return
        memo.fetched.add(verb)
        fields = [f"{where}\n{name}" for where in wheres for name in names]
        try:
            values = await self.redis.hmget(self.class_key(memo.key), fields)
        except (RedisError, OSError) as exc:
            self.stats.errors += 1
            log.debug("shared equivalence entries of class %s unavailable: %s", memo.key, exc)
            return
        except Exception:  # a bug here must cost the reuse only, never the call
            self.stats.errors += 1
            log.exception("fetching shared equivalence entries of class %s failed", memo.key)
            return
        self.stats.fetches += 1
        count = len(names)
        loaded = 0
        for index, where in enumerate(wheres):
            chunk = values[index * count : (index + 1) * count]
            blobs = {name: blob for name, blob in zip(names, chunk, strict=True) if isinstance(blob, bytes)}
            if blobs:
                memo.shared.setdefault(where, {}).update(blobs)
                loaded += len(blobs)
        if loaded:
            self.stats.fetched += loaded
            memo.admitted = True  # another replica met this class: worth keeping here too
            self.cache.hold(loaded)

    def collect(self, memo: ClassMemo) -> None:
        """Queue what the engine computed for this class, to be written behind the answer."""
        outbox = memo.outbox
        if not outbox:
            return
        memo.outbox = []
        room = self.config.max_pending - self._waiting
        if room < len(outbox):
            self.stats.dropped += len(outbox) - max(room, 0)
            outbox = outbox[: max(room, 0)]
            if not outbox:
                return
        self._pending.setdefault(memo.key, []).extend(outbox)
        self._waiting += len(outbox)
        self._wake.set()

    # ------------------------------------------------------------------ behind the answers
    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._write_loop(), name="equivalence-shared-writer"))
        self._tasks.append(asyncio.create_task(self._refresh_loop(), name="equivalence-shared-classes"))

    async def stop(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks.clear()

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.config.flush_seconds)
            raise_if_cancelling()
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # a bug here must not stop later writes; the answers never depended on them
                log.exception("writing shared equivalence entries failed")

    async def _refresh_loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.config.refresh_seconds)
            raise_if_cancelling()

    async def refresh(self) -> None:
        """Read which classes Redis holds entries for (a class not listed is not fetched)."""
        try:
            members = await self.redis.zrange(f"{self.base}:classes", 0, -1)
        except (RedisError, OSError) as exc:
            self.stats.errors += 1
            log.debug("shared equivalence classes unavailable: %s", exc)
            return
        self._known = frozenset(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def flush(self) -> None:
        """Write every queued entry: one script per class (store, extend the TTL, keep the cap), all
        in one pipeline."""
        pending, self._pending, self._waiting = self._pending, {}, 0
        if not pending:
            return
        ttl_ms = max(1, int(self.config.ttl_seconds * 1000))
        pipe = self.redis.pipeline(transaction=False)
        written = 0
        for class_key, computed in pending.items():
            args: list[Any] = [self.base, class_key, ttl_ms, self.config.max_classes]
            for where, name, node, families, payload in computed:
                if where == FILTER:
                    tag, known, failed_at, verdict = payload
                    blob = pack_filter(tag, known, failed_at, verdict, digests(node, families))
                else:
                    blob = pack_scores(payload, digests(node, families))
                args += (f"{where}\n{name}", blob)
            written += len(computed)
            await self._store(args=args, client=pipe)
        started = time.monotonic()
        try:
            await pipe.execute()
        except (RedisError, OSError) as exc:
            self.stats.errors += 1
            self.stats.dropped += written
            log.debug("shared equivalence entries not written (%.0f ms): %s", (time.monotonic() - started) * 1e3, exc)
            return
        self.stats.written += written

    def document(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "known_classes": len(self._known), **self.stats.document()}
