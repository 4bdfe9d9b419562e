"""What every part of the store shares: the client, the key prefix and the registered scripts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript

from extenders import lua

_SCRIPTS = (
    "apply",
    "assume",
    "forget",
    "expire",
    "touch_assumed",
    "refresh_node",
    "catchup",
    "compact",
    "refuse",
)
_LEASE_SCRIPTS = ("lease_acquire", "lease_renew", "lease_release")


class FencedError(RuntimeError):
    """A write by a leader whose term is over: another replica took the lease since."""


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def pairs(flat: Sequence[Any]) -> list[tuple[str, Any]]:
    return [(text(flat[i]), flat[i + 1]) for i in range(0, len(flat), 2)]


def as_hash(flat: Sequence[Any]) -> dict[str, bytes]:
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


class StoreBase:
    """The state the store's parts (writer, reservations, lease, reader) share."""

    def __init__(
        self, redis: aredis.Redis, prefix: str = "extender", *, min_replicas_ack: int = 0, ack_timeout: float = 1.0
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        # Replicas that must hold a reservation before the API binds on it (``replicated``); 0: none.
        self.min_replicas_ack = min_replicas_ack
        self.ack_timeout = ack_timeout
        self._scripts: dict[str, AsyncScript] = {
            **lua.register(redis, _SCRIPTS, head=("prelude",)),
            **lua.register(redis, _LEASE_SCRIPTS, head=("lease_prelude",)),
        }
        self._fence: tuple[int, str] | None = None  # (epoch, store id) of the last lease acquired here
        self._seen_store_id: str | None = None  # the store history of the last full load's index
        self._reader: AbstractConnection | None = None  # held for catch-ups (see ``SnapshotReader``)
        self._reader_busy = False

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def node_key(self, name: str) -> str:
        return f"{self.prefix}:node:{name}"

    async def _run(self, name: str, *args: Any) -> Any:
        return await self._scripts[name](args=[self.prefix, *args])
