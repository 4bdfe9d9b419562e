"""Catch-ups go over a connection the store holds for them: still right when that connection is
killed, when Redis forgot the script, when catch-ups overlap, and after one is cancelled mid-reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from extenders.sync.redis_connect import PoolOptions, RedisPool, RedisTarget
from extenders.sync.store import CatchUp, Op, Store
from tests.store.helpers import node


@pytest.fixture
async def client(redis_url: str, redis_prefix: str) -> AsyncIterator[aredis.Redis]:
    """A client on a replica's own kind of pool (the one that checks a connection out healthy)."""
    pool = RedisPool(RedisTarget(url=redis_url), PoolOptions(timeout=5.0, history_prefix=redis_prefix))
    redis = aredis.Redis(connection_pool=pool.pool)
    yield redis
    await redis.aclose()
    await pool.aclose()


async def leading(redis: aredis.Redis, prefix: str) -> tuple[Store, int]:
    """A store on ``redis`` holding the writer lease, and its epoch."""
    store = Store(redis, prefix)
    lease = (await store.acquire_lease("catch-up-test#0", 30)).lease
    assert lease is not None
    return store, lease.epoch


async def grow(store: Store, epoch: int, name: str) -> int:
    return await store.apply(epoch, [Op.node(node(name))])


def changed(delta: CatchUp) -> list[str]:
    """The names of the nodes a delta carries."""
    assert delta.nodes is not None, delta
    return [n[0] for n in delta.nodes]


async def test_a_killed_connection_is_replaced_and_nothing_is_lost(
    client: aredis.Redis, redis_url: str, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    writer, epoch = await leading(client, redis_prefix)
    options = PoolOptions(timeout=5.0, history_prefix=redis_prefix, client_name="catch-up-reader")
    pool = RedisPool(RedisTarget(url=redis_url), options)
    reader = Store(aredis.Redis(connection_pool=pool.pool), redis_prefix)
    try:
        before = await grow(writer, epoch, "ck-0")
        await reader.catch_up(before, 100)  # the held connection is open
        for round_ in range(1, 3):
            killed = [c["id"] for c in await redis_async.client_list() if c["name"] == "catch-up-reader"]
            assert killed
            for client_id in killed:
                await redis_async.client_kill_filter(_id=client_id)
            now = await grow(writer, epoch, f"ck-{round_}")
            for _ in range(3):
                delta = await reader.catch_up(before, 100)
                assert delta.generation == now
                assert changed(delta) == [f"ck-{i}" for i in range(1, round_ + 1)]
    finally:
        await pool.aclose()


async def test_a_forgotten_script_is_loaded_again(
    client: aredis.Redis, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    store, epoch = await leading(client, redis_prefix)
    before = await grow(store, epoch, "cs-0")
    await store.catch_up(before, 100)
    await redis_async.script_flush()  # as after a restart of Redis without persistence of scripts
    now = await grow(store, epoch, "cs-1")
    delta = await store.catch_up(before, 100)
    assert delta.generation == now and changed(delta) == ["cs-1"]


async def test_overlapping_catch_ups_each_get_their_own_answer(client: aredis.Redis, redis_prefix: str) -> None:
    store, epoch = await leading(client, redis_prefix)
    gens = [await grow(store, epoch, f"co-{i}") for i in range(6)]
    deltas = await asyncio.gather(*(store.catch_up(g, 100) for g in gens[:-1]))
    for since, delta in zip(gens, deltas, strict=False):
        assert delta.generation == gens[-1]
        assert changed(delta) == [f"co-{i}" for i in range(gens.index(since) + 1, 6)]


async def test_a_catch_up_cancelled_mid_reply_does_not_answer_the_next(
    client: aredis.Redis, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    store, epoch = await leading(client, redis_prefix)
    first = await grow(store, epoch, "cc-0")
    await store.catch_up(first, 100)  # the held connection is open
    await redis_async.client_pause(300)  # the next reply comes late
    late = asyncio.create_task(store.catch_up(0, 100))
    await asyncio.sleep(0.1)  # sent, waiting for its reply
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late
    await asyncio.sleep(0.3)
    second = await grow(store, epoch, "cc-1")
    delta = await store.catch_up(first, 100)  # a connection still owing the cancelled reply would answer that
    assert delta.generation == second and changed(delta) == ["cc-1"]
