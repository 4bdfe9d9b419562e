"""Redis losing its data: replicas reload instead of applying a delta from another history, an old
leader is fenced even when the restarted epoch counter hands out its epoch again, and a node the
watcher deleted cannot be brought back by a stale request-borne copy."""

from __future__ import annotations

import pytest
import redis.asyncio as aredis

from extenders.sync.cache import SnapshotCache
from extenders.sync.store import FencedError, Op, Store
from tests.store.helpers import node, pod


async def wipe(store: Store) -> None:
    """What a Redis restart without persistence (or a FLUSHALL) does to our keys."""
    keys = [key async for key in store.redis.scan_iter(match=f"{store.prefix}:*")]
    if keys:
        await store.redis.delete(*keys)


async def test_a_replica_reloads_when_the_store_was_wiped_and_rebuilt_past_its_generation(
    redis_async: aredis.Redis, redis_prefix: str
) -> None:
    writer = Store(redis_async, redis_prefix)
    first = await writer.acquire_lease("a#1", 30)
    assert first.lease is not None
    for name in ("old-1", "old-2", "old-3"):
        await writer.apply(first.lease.epoch, [Op.node(node(name)), Op.pod(pod(f"u-{name}", name))])
    replica = SnapshotCache(Store(redis_async, redis_prefix))
    snap = await replica.refresh()
    assert set(snap.nodes) == {"old-1", "old-2", "old-3"} and snap.generation == 3
    sid = (await replica.store.catch_up(snap.generation, 100)).store_id
    assert sid

    await wipe(writer)
    # the new leader's relist goes past the replica's generation before the replica looks again
    second = await Store(redis_async, redis_prefix).acquire_lease("b#2", 30)
    assert second.lease is not None
    new_writer = Store(redis_async, redis_prefix)
    new_writer._fence = (second.lease.epoch, second.lease.store_id)
    for i in range(5):
        await new_writer.apply(second.lease.epoch, [Op.node(node(f"new-{i}"))])
    assert await writer.generation() > snap.generation

    delta = await replica.store.catch_up(snap.generation, 100)
    assert delta.reload and delta.store_id and delta.store_id != sid
    snap = await replica.refresh()
    # a delta from generation 3 of the other history would have kept old-1..3 and missed new-0..2
    assert set(snap.nodes) == {f"new-{i}" for i in range(5)}
    assert snap.generation == await writer.generation()
    assert replica.stats.full_loads == 2
    # and from then on it is deltas again
    await new_writer.apply(second.lease.epoch, [Op.node(node("new-5"))])
    snap = await replica.refresh()
    assert "new-5" in snap.nodes and replica.stats.full_loads == 2 and replica.stats.deltas == 1


async def test_a_wipe_during_a_full_load_makes_it_load_again(redis_async: aredis.Redis, redis_prefix: str) -> None:
    writer = Store(redis_async, redis_prefix)
    lease = (await writer.acquire_lease("a#1", 30)).lease
    assert lease is not None
    await writer.apply(lease.epoch, [Op.node(node("old"))])
    reader = Store(redis_async, redis_prefix)
    gen0, index = await reader.node_index()  # a full load starts: the old history
    assert gen0 == 1 and set(index) == {"old"}
    await wipe(writer)
    # the next leader rebuilds (generation 1 again, different content)
    lease = (await writer.acquire_lease("b#2", 30)).lease
    assert lease is not None
    await writer.apply(lease.epoch, [Op.node(node("new"))])
    # the catch-up that ends the load sees generation 1 == gen0, but another history
    delta = await reader.catch_up(gen0, 100)
    assert delta.reload


async def test_an_old_leader_is_fenced_after_a_wipe_even_with_the_same_epoch(
    redis_async: aredis.Redis, redis_prefix: str
) -> None:
    old = Store(redis_async, redis_prefix)  # each leader replica has its own Store
    first = await old.acquire_lease("a#1", 30)
    assert first.lease is not None and first.lease.store_id
    await old.apply(first.lease.epoch, [Op.node(node("n1"))])
    await wipe(old)
    new = Store(redis_async, redis_prefix)
    second = await new.acquire_lease("b#2", 30)
    assert second.lease is not None
    assert second.lease.epoch == first.lease.epoch  # the counter restarted: same number
    assert second.lease.store_id != first.lease.store_id
    with pytest.raises(FencedError):
        await old.apply(first.lease.epoch, [Op.node(node("stale"))])
    await new.apply(second.lease.epoch, [Op.node(node("fresh"))])
    assert await new.hash_keys("noderv") == {"fresh"}
    assert not await old.renew_lease(first.lease, 30)


async def test_an_old_leader_is_fenced_when_the_wipe_comes_between_reading_the_id_and_the_epoch(
    redis_async: aredis.Redis, redis_prefix: str
) -> None:
    store = Store(redis_async, redis_prefix)
    sid = await store.store_id()
    await wipe(store)
    attempt = await store.acquire_lease("a#1", 30)  # reads a new id itself; simulate the stale one
    assert attempt.lease is not None
    store._fence = (attempt.lease.epoch, sid)
    with pytest.raises(FencedError):
        await store.apply(attempt.lease.epoch, [Op.node(node("n1"))])


async def test_a_deleted_node_is_not_brought_back_by_a_stale_request(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1", rv="10")), Op.node(node("n2", rv="20"))])
    # a watch DELETED event carries the object's last resourceVersion
    await store.apply(epoch, [Op.delete_node("n1", "12")])
    for stale in ("10", "11", "12"):
        assert not await store.refresh_node_if_newer(node("n1", rv=stale))
        assert (await store.read_node("n1"))[0] is None
    # a relist's delete knows no object version: the last stored one is the marker
    await store.apply(epoch, [Op.delete_node("n2")])
    assert not await store.refresh_node_if_newer(node("n2", rv="20"))
    assert (await store.read_node("n2"))[0] is None
    # a node re-created under the same name (a newer version) is welcome
    assert await store.refresh_node_if_newer(node("n1", rv="13"))
    facts, _ = await store.read_node("n1")
    assert facts is not None and facts.resource_version == "13"
    # once the watcher stores the node again, its marker is gone
    await store.apply(epoch, [Op.node(node("n2", rv="30"))])
    assert await store.redis.hget(store.key("nodegone"), "n2") is None
    # a node never deleted by the watcher can still be added by a request (no marker)
    assert await store.refresh_node_if_newer(node("n3", rv="1"))


async def test_old_deletion_markers_are_pruned(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1", rv="5")), Op.delete_node("n1", "6")])
    # age the marker past a day
    await store.redis.zadd(store.key("nodegonez"), {"n1": 1})
    await store.apply(epoch, [Op.node(node("n2", rv="7")), Op.delete_node("n2", "8")])
    assert await store.hash_keys("nodegone") == {"n2"}
    assert await store.redis.zrange(store.key("nodegonez"), 0, -1) == [b"n2"]
