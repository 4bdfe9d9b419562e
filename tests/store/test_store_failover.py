"""What a Redis failover may lose, and what the store does about it, against real processes.

Replication is asynchronous: a write the old primary acknowledged may never reach the replica that
Sentinel promotes. Reads of such a write must not outlive the failover (a new store history makes
every replica reload and fences the old leader), and a bind can ask for its reservation to be on
replicas (WAIT) before the API server hears of it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis.asyncio as aredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from extenders.binding.binder import Binder, BindTarget
from extenders.sync.cache import SnapshotCache
from extenders.sync.redis_connect import PoolOptions, RedisPool, RedisTarget
from extenders.sync.store import FencedError, Op, Store
from tests.gang_support import LocalRuntime, RecordingKube, gpu_node, member, seed
from tests.plugins.redis_replication import ReplicatedRedis, SentinelSet, wait_replicated
from tests.store.helpers import node

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")


async def through_failover(call: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
    """``call()`` again while it fails on a connection the failover broke (the next one asks Sentinel)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except (RedisConnectionError, RedisTimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.fixture
async def pools() -> AsyncIterator[list[RedisPool]]:
    opened: list[RedisPool] = []
    yield opened
    for pool in opened:
        await pool.aclose()


def client(pools: list[RedisPool], target: RedisTarget, prefix: str) -> aredis.Redis:
    pool = RedisPool(target, PoolOptions(timeout=2.0, history_prefix=prefix))
    pools.append(pool)
    return aredis.Redis(connection_pool=pool.pool)


async def test_writes_lost_in_a_failover_leave_no_trace_in_replicas_that_had_read_them(
    sentinel_set: SentinelSet, redis_prefix: str, pools: list[RedisPool]
) -> None:
    target = RedisTarget(
        sentinels=tuple(("127.0.0.1", s.port) for s in sentinel_set.sentinels), sentinel_master=sentinel_set.master
    )
    old_leader = Store(client(pools, target, redis_prefix), redis_prefix)
    reader = SnapshotCache(Store(client(pools, target, redis_prefix), redis_prefix))
    term = (await old_leader.acquire_lease("old#1", 30)).lease
    assert term is not None
    await old_leader.apply(term.epoch, [Op.node(node("kept"))])
    assert set((await reader.refresh()).nodes) == {"kept"}
    await asyncio.to_thread(wait_replicated, sentinel_set.primary, sentinel_set.replica)

    # The replica hears nothing more (stopped, and its link cut: bytes already sent would still reach
    # it from the socket buffer): the next write is acknowledged by the primary alone, and read.
    sentinel_set.replica.signal(signal.SIGSTOP)
    with sentinel_set.primary.client() as primary:
        assert primary.client_kill_filter(_type="replica") == 1
    await old_leader.apply(term.epoch, [Op.node(node("ghost"))])
    seen = await reader.refresh()
    assert set(seen.nodes) == {"kept", "ghost"}
    sentinel_set.primary.kill()
    sentinel_set.replica.signal(signal.SIGCONT)
    await asyncio.to_thread(sentinel_set.wait_promoted, sentinel_set.replica)

    # A new leader writes on the promoted replica before the reader looks again, past the generation
    # the reader holds: a delta from there would keep "ghost" and miss "after-0".
    new_leader = Store(client(pools, target, redis_prefix), redis_prefix)
    new_term = (await through_failover(lambda: new_leader.acquire_lease("new#2", 30))).lease
    assert new_term is not None, "the failover must end the old term: its lease is dropped"
    for i in range(3):
        await new_leader.apply(new_term.epoch, [Op.node(node(f"after-{i}"))])
    assert await new_leader.generation() > seen.generation

    after = await through_failover(reader.refresh)
    assert set(after.nodes) == {"kept", "after-0", "after-1", "after-2"}
    assert reader.stats.full_loads == 2
    # The old leader, still thinking it leads, is fenced and loses its lease at its next renewal.
    with pytest.raises(FencedError):
        await through_failover(lambda: old_leader.apply(term.epoch, [Op.node(node("late"))]))
    assert not await old_leader.renew_lease(term, 30)
    assert "late" not in (await reader.refresh()).nodes


async def test_a_new_history_starts_only_when_another_server_process_served_the_keys(
    redis_url: str, redis_prefix: str, redis_async: aredis.Redis, pools: list[RedisPool], caplog: Any
) -> None:
    target = RedisTarget(url=redis_url)
    fresh = client(pools, target, redis_prefix)
    await fresh.ping()  # an empty store: the server is noted, no history is made up
    run_id = (await redis_async.info("server"))["run_id"]
    assert await redis_async.get(f"{redis_prefix}:server") == run_id.encode()
    assert await redis_async.get(f"{redis_prefix}:storeid") is None

    store = Store(fresh, redis_prefix)
    term = (await store.acquire_lease("a#1", 30)).lease
    assert term is not None
    await store.apply(term.epoch, [Op.node(node("n1"))])
    await client(pools, target, redis_prefix).ping()  # the same server again: nothing changes
    assert await store.store_id() == term.store_id and await store.leader() == "a"

    await redis_async.set(f"{redis_prefix}:server", "run-id-of-the-primary-before")
    with caplog.at_level(logging.WARNING, logger="extenders.sync.redis_connect"):
        await client(pools, target, redis_prefix).ping()
    assert await store.store_id() != term.store_id and await store.leader() is None
    assert await redis_async.get(f"{redis_prefix}:server") == run_id.encode()
    assert any("started store history" in r.getMessage() and redis_prefix in r.getMessage() for r in caplog.records)
    with pytest.raises(FencedError):
        await store.apply(term.epoch, [Op.node(node("n2"))])


async def test_a_bind_waits_until_a_replica_holds_its_reservation(
    replicated_redis: ReplicatedRedis, redis_prefix: str
) -> None:
    redis_client = aredis.Redis.from_url(replicated_redis.primary.url)
    try:
        # Patient while the replica is up (a loaded machine can take longer than 0.5 s to ack).
        store = Store(redis_client, redis_prefix, min_replicas_ack=1, ack_timeout=10.0)
        first, second = member("p1", None), member("p2", None)
        kube = RecordingKube()
        for p in (first, second):
            kube.add(p)
        await seed(store, [gpu_node("n1")], [first, second])
        binder = Binder(LocalRuntime(store, kube))  # type: ignore[arg-type]

        assert await binder.bind(BindTarget("default", "p1", first["metadata"]["uid"], "n1")) == ""
        assert kube.bound == {"default/p1": "n1"}
        with replicated_redis.replica.client() as replica:  # the reservation was there before the binding
            assert replica.hget(f"{redis_prefix}:podloc", first["metadata"]["uid"]) == "n1"

        replicated_redis.replica.kill()
        store.ack_timeout = 0.5
        started = time.monotonic()
        error = await binder.bind(BindTarget("default", "p2", second["metadata"]["uid"], "n1"))
        waited = time.monotonic() - started
        assert "reached 0 of the 1 Redis replicas asked for within 0.5s" in error, error
        assert 0.45 < waited < 3.0, waited
        assert "default/p2" not in kube.bound and kube.calls == 1, "the API must not hear of it"
        assert second["metadata"]["uid"] not in await store.placed_pods(), "the reservation is given back"
    finally:
        await redis_client.aclose()


async def test_without_acknowledgements_asked_for_nothing_waits(redis_async: aredis.Redis, redis_prefix: str) -> None:
    store = Store(redis_async, redis_prefix)
    assert await store.replicated() is None
    assert await redis_async.exists(f"{redis_prefix}:acks") == 0


async def test_a_user_without_info_gets_working_connections_and_no_history_check(
    redis_url: str, redis_prefix: str, redis_async: aredis.Redis, pools: list[RedisPool], caplog: Any
) -> None:
    user, password = f"noinfo-{redis_prefix}", "pw-" + redis_prefix
    await redis_async.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys="*", channels="*", commands=["+@all", "-info"]
    )
    try:
        url = redis_url.replace("redis://", f"redis://{user}:{password}@", 1)
        with caplog.at_level(logging.WARNING, logger="extenders.sync.redis_connect"):
            limited = client(pools, RedisTarget(url=url), redis_prefix)
            await limited.set(f"{redis_prefix}:probe", "1")
            # Each reply is the one asked for: the refused INFO left nothing behind on the connection.
            assert await limited.get(f"{redis_prefix}:probe") == b"1"
            assert await limited.incr(f"{redis_prefix}:count") == 1
        assert any("refuses INFO" in r.getMessage() for r in caplog.records)
        assert await redis_async.get(f"{redis_prefix}:server") is None
    finally:
        await redis_async.acl_deluser(user)


async def test_connections_the_server_closed_are_not_handed_out(
    redis_url: str, redis_prefix: str, redis_async: aredis.Redis, pools: list[RedisPool]
) -> None:
    """A restart, a failover or an idle timeout closes the pool's idle connections: the pool opens
    new ones instead of failing the next command on each."""
    fresh = client(pools, RedisTarget(url=redis_url), redis_prefix)
    keys = [f"{redis_prefix}:closed-{i}" for i in range(3)]
    await asyncio.gather(*(fresh.set(k, "1") for k in keys))  # a few pooled connections, all idle now
    assert await redis_async.client_kill_filter(_type="normal", skipme=True) >= 1
    await asyncio.sleep(0.2)  # the closes have reached this end
    for key in keys:
        assert await fresh.get(key) == b"1"
