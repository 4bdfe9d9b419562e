"""What replicas read: the atomic catch-up behind every snapshot refresh, and full loads."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.exceptions import NoScriptError

from extenders.model import NodeFacts, PodInfo
from extenders.sync import kinds
from extenders.sync.ops import PENDING
from extenders.sync.records import decode_node_hash
from extenders.sync.store.base import StoreBase, as_hash, pairs, text

T = TypeVar("T")

# A record hash's changes since a generation: (key, record), record None where it was deleted.
Changes = list[tuple[str, bytes | None]]


@dataclass(slots=True)
class CatchUp:
    """A replica's raw delta, decoded by ``extenders.sync.cache``."""

    generation: int
    reload: bool = False  # also set when the store id changed since this Store last saw it
    nodes: list[tuple[str, int, str, dict[str, bytes]]] | None = None  # (name, gen, rv, fields); {} = gone
    items: dict[str, Changes] | None = None  # by record hash: ``pending`` and each kind's
    store_id: str = ""  # the store history this reply comes from (see ``P:storeid``)

    @property
    def changed(self) -> bool:
        return self.reload or self.nodes is not None

    def of(self, hash_name: str) -> Changes | None:
        return None if self.items is None else self.items.get(hash_name)


def caught_up_hashes() -> tuple[str, ...]:
    """The record hashes a catch-up reads: pending pods and every kind of the table, as it is now."""
    return (PENDING, *(kind.hash for kind in kinds.KINDS))


class SnapshotReader(StoreBase):
    async def generation(self) -> int:
        return int(await self.redis.get(self.key("gen")) or 0)

    async def synced(self) -> str | None:
        value = await self.redis.get(self.key("synced"))
        return text(value) if value is not None else None

    def _other_history(self, store_id: str) -> bool:
        """True when a catch-up comes from another history than the last full load's (``node_index``).

        Not consumed by asking: every catch-up says so until the caller loads in full again.
        """
        if self._seen_store_id is None:
            self._seen_store_id = store_id
        return self._seen_store_id != store_id

    async def catch_up(self, since: int, max_items: int, hashes: Sequence[str] | None = None) -> CatchUp:
        """Everything changed after generation ``since``, read atomically (one round trip): the nodes
        and the records of ``hashes`` (default: ``caught_up_hashes()``).

        ``reload`` is set as well when the store id differs from the one this Store's last
        ``node_index`` (the start of a full load) saw: the data was lost and rebuilt since, so
        generations from before mean nothing now (the caller must load everything again).
        """
        names = tuple(hashes) if hashes is not None else caught_up_hashes()
        reply = await self._catch_up_reply(int(since), int(max_items), secrets.token_hex(8), ",".join(names))
        gen, store_id = int(reply[0]), text(reply[1])
        if self._other_history(store_id):
            return CatchUp(gen, reload=True, store_id=store_id)
        if len(reply) == 2:
            return CatchUp(gen, store_id=store_id)
        if text(reply[2]) == "reload":
            return CatchUp(gen, reload=True, store_id=store_id)
        nodes = [(text(n[0]), int(n[1]), text(n[2]) if n[2] else "", as_hash(n[3])) for n in reply[3]]
        items = {name: pairs(flat) for name, flat in zip(names, reply[4:], strict=True)}
        return CatchUp(gen, False, nodes, items, store_id)

    async def _catch_up_reply(self, *args: Any) -> Any:
        """The catch-up script's reply, over a connection this store holds for it when it can.

        Every filter and bind waits for a catch-up; the pool's checkout and the client's command
        layers cost about half of its CPU at a replica (measured). Catch-ups do not overlap (the
        snapshot cache runs one at a time); one that would, or that finds the script gone, goes the
        ordinary way.
        """
        if self._reader_busy:
            return await self._run("catchup", *args)
        self._reader_busy = True
        try:
            reply = await self._held_catch_up(args)
        finally:
            self._reader_busy = False
        return reply if reply is not None else await self._run("catchup", *args)

    async def _held_catch_up(self, args: tuple[Any, ...]) -> Any:
        """The reply on the held connection; None when Redis no longer has the script (after a restart:
        the ordinary path loads it)."""
        started = time.perf_counter()
        pool = self.redis.connection_pool
        try:
            if self._reader is None:
                self._reader = await pool.get_connection()  # type: ignore[no-untyped-call]
            # The pool's own check at checkout: connected (a Sentinel-managed connection asks Sentinel
            # for the primary, and one to a replaced primary is closed first), and opened again if the
            # server closed it.
            await pool.ensure_connection(self._reader)
            await self._reader.send_command("EVALSHA", self._scripts["catchup"].sha, 0, self.prefix, *args)
            reply = await self._reader.read_response()
        except NoScriptError:
            return None
        except Exception:
            self._observe(started, failed=True)
            raise
        self._observe(started)
        return reply

    def _observe(self, started: float, failed: bool = False) -> None:
        """The held catch-up in ``extender_redis_*``, as every other command is."""
        observe = getattr(self.redis, "observe", None)
        if observe is not None:
            observe("catchup", time.perf_counter() - started, failed)

    async def node_index(self) -> tuple[int, dict[str, int]]:
        """The cluster generation and every node's generation (tombstones included), read together.

        The store id is read with them and remembered, so the ``catch_up`` that ends a full load
        reports ``reload`` if the data was lost in between.
        """
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.key("storeid"), secrets.token_hex(8), nx=True)
            pipe.get(self.key("storeid"))
            pipe.get(self.key("gen"))
            pipe.zrange(self.key("nodes"), 0, -1, withscores=True)
            _, store_id, gen, scored = await pipe.execute()
        self._seen_store_id = text(store_id)
        return int(gen or 0), {text(n): int(s) for n, s in scored}

    async def node_hashes(self, names: Sequence[str], batch: int = 256) -> dict[str, dict[str, bytes]]:
        """Node hashes by name, pipelined in batches (one round trip per batch)."""
        out: dict[str, dict[str, bytes]] = {}
        for start in range(0, len(names), batch):
            chunk = names[start : start + batch]
            async with self.redis.pipeline(transaction=False) as pipe:
                for name in chunk:
                    pipe.hgetall(self.node_key(name))
                results = await pipe.execute()
            for name, fields in zip(chunk, results, strict=True):
                out[name] = {text(k): v for k, v in fields.items()}
        return out

    async def hash_all(self, name: str) -> dict[str, bytes]:
        """A whole record hash (``noderv``, ``pending``, a kind's), scanned in pages."""
        out: dict[str, bytes] = {}
        async for k, v in self.redis.hscan_iter(self.key(name), count=2000):
            out[text(k)] = v
        return out

    async def hash_keys(self, name: str) -> set[str]:
        return {text(k) for k in await self.redis.hkeys(self.key(name))}

    async def placed_pods(self) -> dict[str, str]:
        """uid -> node for every placed pod (bound or assumed)."""
        return {k: text(v) for k, v in (await self.hash_all("podloc")).items()}

    async def assumed_pods(self) -> dict[str, int]:
        """uid -> deadline (ms since the epoch, Redis clock) of every assumed pod."""
        scored: list[Any] = await self.redis.zrange(self.key("assumed"), 0, -1, withscores=True)
        return {text(k): int(v) for k, v in scored}

    async def node_generation(self, name: str) -> int:
        score = await self.redis.zscore(self.key("nodes"), name)
        return int(score or 0)

    async def record(self, kind: kinds.Kind[T], key: str) -> T | None:
        """One stored record of a kind (for tests and tools; replicas use the cache)."""
        raw = await self.redis.hget(self.key(kind.hash), key)
        return kind.decode(key, raw) if raw else None

    async def read_node(self, name: str) -> tuple[NodeFacts | None, dict[str, PodInfo]]:
        """One node's stored facts and pods (for tests and tools; replicas use the cache)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.node_key(name))
            pipe.hget(self.key("noderv"), name)
            results: list[Any] = await pipe.execute()
        fields: dict[bytes, bytes] = results[0]
        rv: bytes | None = results[1]
        return decode_node_hash({text(k): v for k, v in fields.items()}, rv.decode() if rv else "")
