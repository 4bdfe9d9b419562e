"""Fixtures for the Redis store tests: a Store on the test's prefix, a leader epoch, a round-trip counter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.sync.store import Store


class RoundTrips:
    """Counts what a client sends: one per command, one per pipeline."""

    def __init__(self) -> None:
        self.count = 0


def counting_connection(counter: RoundTrips) -> type[aredis.Connection]:
    class CountingConnection(aredis.Connection):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            await super().send_packed_command(command, check_health)

    return CountingConnection


@pytest.fixture
async def store(redis_async: aredis.Redis, redis_prefix: str) -> Store:
    return Store(redis_async, redis_prefix)


@pytest.fixture
async def epoch(store: Store) -> int:
    attempt = await store.acquire_lease("test-leader#0", 30)
    assert attempt.lease is not None
    return attempt.lease.epoch


@pytest.fixture
async def counted(redis_url: str, redis_prefix: str) -> AsyncIterator[tuple[Store, RoundTrips]]:
    """A Store whose client counts round trips (scripts preloaded, connection warm)."""
    counter = RoundTrips()
    pool = aredis.ConnectionPool.from_url(redis_url, connection_class=counting_connection(counter))
    client = aredis.Redis(connection_pool=pool)
    await client.ping()
    yield Store(client, redis_prefix), counter
    await client.aclose()
    await pool.aclose()
