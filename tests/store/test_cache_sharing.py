"""A replica's snapshot cache: callers arriving together share one catch-up, never one that read Redis
before they arrived; ``held`` and ``refresh_soon`` hand out only a recent read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from extenders.sync.cache import SnapshotCache
from extenders.sync.store import CatchUp, Op, Store
from tests.store.conftest import RoundTrips
from tests.store.helpers import pod, seed


async def test_concurrent_refreshes_share_one_round_trip(counted: tuple[Store, RoundTrips], epoch: int) -> None:
    store, trips = counted
    await seed(store, epoch)
    cache = SnapshotCache(store)
    await cache.refresh()
    await store.apply(epoch, [Op.pod(pod("new", "n1"))])
    trips.count = 0
    results = await asyncio.gather(*(cache.refresh() for _ in range(10)))
    assert trips.count == 1
    assert all(r is results[0] for r in results) and "new" in results[0].nodes["n1"].pods


async def test_a_caller_never_shares_a_refresh_that_read_redis_before_it_arrived(store: Store, epoch: int) -> None:
    """A bind answered by another replica, then a filter here while an older refresh is still under way:
    the filter must see the bind, so it waits for a refresh of its own instead of sharing that one."""
    await seed(store, epoch)
    cache = SnapshotCache(store)
    await cache.refresh()
    read, release = asyncio.Event(), asyncio.Event()
    catch_up = store.catch_up

    async def slow_catch_up(since: int, max_items: int, hashes: Sequence[str] | None = None) -> CatchUp:
        delta = await catch_up(since, max_items, hashes)
        if not read.is_set():  # only the first one is held, after it read Redis
            read.set()
            await release.wait()
        return delta

    store.catch_up = slow_catch_up  # type: ignore[method-assign]
    older = asyncio.ensure_future(cache.refresh())
    await read.wait()
    await store.apply(epoch, [Op.pod(pod("bound-elsewhere", "n1"))])
    later = asyncio.ensure_future(cache.refresh())
    also_later = asyncio.ensure_future(cache.refresh())
    await asyncio.sleep(0.05)
    assert not later.done()  # waiting for the older refresh to end: refreshes never overlap
    release.set()
    assert "bound-elsewhere" not in (await older).nodes["n1"].pods
    snap = await later
    assert "bound-elsewhere" in snap.nodes["n1"].pods
    assert await also_later is snap  # callers arriving together share the one after
    assert cache.stats.refreshes == 3


async def test_a_cancelled_caller_does_not_cancel_the_shared_refresh(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    first = asyncio.ensure_future(cache.refresh())
    second = asyncio.ensure_future(cache.refresh())
    await asyncio.sleep(0)
    first.cancel()
    snap = await second
    assert len(snap.nodes) == 20 and cache.loaded


async def test_held_hands_out_only_a_recent_read_and_refresh_soon_reads_again(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    assert cache.held(60) is None  # nothing read yet
    first = await cache.refresh()
    assert cache.held(60) is first
    await asyncio.sleep(0.05)
    assert cache.held(0.02) is None  # read more than 20 ms ago
    await store.apply(epoch, [Op.pod(pod("soon", "n3", cpu=700))])
    assert cache.held(60) is first  # held reads nothing
    cache.refresh_soon()
    cache.refresh_soon()  # one read queued already: no second
    for _ in range(100):
        if cache.current is not first:
            break
        await asyncio.sleep(0.01)
    later = cache.held(0.5)
    assert later is not None and later is not first and "soon" in later.nodes["n3"].pods
    assert cache.stats.refreshes == 2


async def test_refresh_soon_skips_a_young_read_and_one_under_way(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    first = await cache.refresh()
    await store.apply(epoch, [Op.pod(pod("young", "n3", cpu=700))])
    cache.refresh_soon(older_than=60)  # the last read began less than a minute ago: nothing read
    await asyncio.sleep(0.05)
    assert cache.current is first and cache.stats.refreshes == 1
    await asyncio.sleep(0.02)
    cache.refresh_soon(older_than=0.05)  # now older than that: read
    await asyncio.sleep(0)  # under way
    cache.refresh_soon()  # one under way already: no second behind it
    for _ in range(100):
        if cache.current is not first:
            break
        await asyncio.sleep(0.01)
    assert "young" in cache.current.nodes["n3"].pods
    await asyncio.sleep(0.05)
    assert cache.stats.refreshes == 2


async def test_refresh_soon_leaves_a_failed_read_to_the_next_caller(
    store: Store, epoch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    first = await cache.refresh()

    async def broken(*_: object) -> CatchUp:
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(store, "catch_up", broken)
    cache.refresh_soon()
    await asyncio.sleep(0.05)
    assert cache.current is first  # nothing applied, nothing raised here
    with pytest.raises(ConnectionError):
        await cache.refresh()
    monkeypatch.undo()
    assert (await cache.refresh()).generation == first.generation
