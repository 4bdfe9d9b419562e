"""A replica's Sentinel pool leaves a primary that Sentinel replaced while it is still reachable (a split
brain): redis-py alone would keep every connection that was in use at the change, and the store's held
catch-up connection, on the old primary for as long as it answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from extenders.sync.redis_connect import PoolOptions, RedisPool, RedisTarget, reaches_primary
from extenders.sync.store import Store
from tests.plugins.redis_replication import APP_PASSWORD, APP_USER, RedisNode, SentinelSet, cut_off
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

NAME = "kube-gang-extender:follow-test"


@pytest.fixture
async def pool(partitionable_sentinel_set: SentinelSet) -> AsyncIterator[RedisPool]:
    redis = partitionable_sentinel_set
    target = RedisTarget(
        url=f"redis://{APP_USER}:{APP_PASSWORD}@/0",
        sentinels=tuple(("127.0.0.1", s.port) for s in redis.sentinels),
        sentinel_master=redis.master,
    )
    options = PoolOptions(timeout=2.0, history_prefix="follow", client_name=NAME, primary_check_seconds=0.2)
    found = RedisPool(target, options)
    found.start()
    yield found
    await found.aclose()


def connections_on(node: RedisNode) -> int:
    with node.client() as client:
        return sum(1 for c in client.client_list() if c["name"] == NAME)


async def test_connections_in_use_at_the_change_and_the_held_reader_leave_the_old_primary(
    pool: RedisPool, partitionable_sentinel_set: SentinelSet
) -> None:
    redis = partitionable_sentinel_set
    client = aredis.Redis(connection_pool=pool.pool)
    store = Store(client, "follow")
    await store.catch_up(0, 10)  # opens the held catch-up connection
    busy = await pool.pool.get_connection()  # type: ignore[no-untyped-call]
    await asyncio.gather(*(client.ping() for _ in range(4)))  # a few idle ones
    assert connections_on(redis.primary) >= 3
    assert pool.primary == redis.primary.address and pool.primary_changes == 0

    cut_off(redis.primary)
    await asyncio.to_thread(redis.wait_promoted, redis.replica)

    async def named_the_promoted() -> bool:
        return pool.primary == redis.replica.address

    # Nothing but the pool's own checks runs here: no connection is opened to tell it.
    await eventually(named_the_promoted, 5)
    assert pool.primary_changes == 1, "the failover counted once"
    assert busy.is_connected and not reaches_primary(pool.pool, busy), "the old primary still answers"
    await pool.pool.release(busy)
    assert not busy.is_connected, "a connection to the old primary went back to the pool open"

    await asyncio.gather(*(client.ping() for _ in range(4)))
    await store.catch_up(0, 10)
    assert connections_on(redis.primary) == 0
    assert connections_on(redis.replica) >= 2
    await client.aclose()


async def test_without_sentinel_every_connection_reaches_the_primary(redis_url: str) -> None:
    pool = RedisPool(RedisTarget(url=redis_url), PoolOptions(timeout=2.0))
    pool.start()  # nothing to follow: no task
    client = aredis.Redis(connection_pool=pool.pool)
    connection = await pool.pool.get_connection()  # type: ignore[no-untyped-call]
    await pool.pool.ensure_connection(connection)
    assert reaches_primary(pool.pool, connection)
    await pool.pool.release(connection)
    assert connection.is_connected and pool.primary_changes == 0
    await client.aclose()
    await pool.aclose()
