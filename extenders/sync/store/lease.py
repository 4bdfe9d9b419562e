"""The watch leader's lease: one term at a time, each fenced by its epoch and the store's history."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from extenders.sync.store.base import StoreBase, text


@dataclass(slots=True, frozen=True)
class Lease:
    """A held leader lease: ``value`` is what renew/release compare against."""

    holder: str
    epoch: int
    value: str
    store_id: str = ""  # the store history the term began in; writes outside it are fenced


@dataclass(slots=True, frozen=True)
class LeaseAttempt:
    lease: Lease | None
    retry_ms: int  # how long the current holder's lease still runs (when not acquired)
    holder: str = ""


def holder_replica(holder_value: str) -> str:
    """The replica id inside a lease value ``replica#token|epoch``."""
    return holder_value.rsplit("|", 1)[0].rsplit("#", 1)[0]


class LeaseHolder(StoreBase):
    async def store_id(self) -> str:
        """The id of the store's current history, created (SET NX) if missing."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.key("storeid"), secrets.token_hex(8), nx=True)
            pipe.get(self.key("storeid"))
            _, value = await pipe.execute()
        return text(value)

    async def acquire_lease(self, holder: str, ttl: float) -> LeaseAttempt:
        """Take the lease if free; the term is fenced by its epoch and the store id.

        The store id is read first (two round trips): if the data is lost between the two, the
        id this term carries is no longer the store's, so its writes are fenced (the safe way).
        """
        store_id = await self.store_id()
        reply = await self._run("lease_acquire", holder, int(ttl * 1000))
        epoch = int(reply[0])
        if epoch:
            self._fence = (epoch, store_id)
            return LeaseAttempt(Lease(holder, epoch, f"{holder}|{epoch}", store_id), 0)
        return LeaseAttempt(None, max(0, int(reply[1])), text(reply[2]))

    async def renew_lease(self, lease: Lease, ttl: float) -> bool:
        return bool(await self._run("lease_renew", lease.value, int(ttl * 1000)))

    async def release_lease(self, lease: Lease) -> bool:
        return bool(await self._run("lease_release", lease.value))

    async def leader(self) -> str | None:
        """The replica id holding the lease, if any."""
        value = await self.redis.get(self.key("leader"))
        return holder_replica(text(value)) if value else None

    async def epoch(self) -> int:
        return int(await self.redis.get(self.key("epoch")) or 0)
