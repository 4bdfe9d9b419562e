"""The gang decisions journal: the scripts append each gang decision to a Redis stream.

Whichever replica's script makes a decision, it lands in one stream in the same atomic step, so
the watch leader can report each decision exactly once (metrics, Events on the PodGroup, its
status) without the replicas telling each other. The leader keeps its read position in Redis,
so a new leader goes on where the old one stopped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aredis
from redis.exceptions import RedisError

from extenders.aio import cancelling

log = logging.getLogger(__name__)

ADMITTED = "admitted"
PERMITTED = "permitted"
REJECTED = "rejected"
RELEASED = "released"  # stood down: fewer live members than its minimum (extenders.gang.reconcile)
VANISHED = "vanished"  # no live member left: its bookkeeping was dropped


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(fields: dict[str, str], name: str) -> int | None:
    try:
        return int(float(fields[name]))
    except (KeyError, ValueError):
        return None


@dataclass(slots=True, frozen=True)
class Decision:
    """One journal entry; times are Redis's clock in ms."""

    gang: str
    kind: str
    at_ms: int
    first_arrival_ms: int | None = None  # permitted, rejected: when the window opened
    admitted_ms: int | None = None  # permitted: when the gang got its assembling slot
    cool_ms: int | None = None  # rejected: the cool-down that follows
    why: str = ""

    @classmethod
    def from_fields(cls, raw: dict[Any, Any]) -> Decision:
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return cls(
            gang=fields.get("gang", ""),
            kind=fields.get("kind", ""),
            at_ms=_ms(fields, "t") or 0,
            first_arrival_ms=_ms(fields, "first"),
            admitted_ms=_ms(fields, "admitted"),
            cool_ms=_ms(fields, "cool"),
            why=fields.get("why", ""),
        )

    @property
    def window_seconds(self) -> float | None:
        return (self.at_ms - self.first_arrival_ms) / 1000 if self.first_arrival_ms else None

    @property
    def since_admission_seconds(self) -> float | None:
        return (self.at_ms - self.admitted_ms) / 1000 if self.admitted_ms else None


class GangJournal:
    """Reads the journal from the last position read by any leader and hands each entry on."""

    def __init__(
        self,
        redis: aredis.Redis,
        prefix: str,
        handle: Callable[[Decision], Awaitable[None]],
        *,
        block_ms: int = 1000,
        batch: int = 200,
        retry_seconds: float = 1.0,
    ) -> None:
        self.redis = redis
        self.key = f"{prefix}:gangjournal"
        self.cursor_key = f"{prefix}:gangjournal:read"
        self.handle = handle
        self.block_ms = block_ms
        self.batch = batch
        self.retry_seconds = retry_seconds

    async def run(self) -> None:
        """Follow the journal until cancelled (the leader's work)."""
        cursor: str | None = None
        delay = self.retry_seconds
        while True:
            try:
                if cursor is None:
                    stored = await self.redis.get(self.cursor_key)
                    # No position yet: the journal's past belongs to nobody's term; start at its end.
                    cursor = _text(stored) if stored else "$"
                cursor = await self._read(cursor)
                delay = self.retry_seconds
            except (RedisError, OSError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.warning("reading the gang journal failed (%s); retrying in %.0fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _read(self, cursor: str) -> str:
        reply: Any = await self.redis.xread({self.key: cursor}, count=self.batch, block=self.block_ms)
        if not reply:
            if cursor == "$":
                # Pin the position, so entries added between two reads are not skipped.
                last = await self.redis.xinfo_stream(self.key) if await self.redis.exists(self.key) else None
                return _text(last["last-generated-id"]) if last else "0-0"
            return cursor
        for _stream, entries in reply:
            for entry_id, fields in entries:
                cursor = _text(entry_id)
                try:
                    await self.handle(Decision.from_fields(fields))
                except (RedisError, OSError):
                    raise  # the batch is read again: a Redis outage may report a decision twice
                except Exception:  # one bad entry must not stop the reporting of the rest
                    log.exception("gang journal entry %s could not be reported", cursor)
        await self.redis.set(self.cursor_key, cursor)
        return cursor
