"""The leader lease and fencing: a deposed leader cannot write, and election hands over within the lease."""

from __future__ import annotations

import asyncio
import time

import pytest

from extenders.sync.leader import LeaderElector
from extenders.sync.store import FencedError, Op, Store
from tests.store.helpers import dump, node, pod


async def test_a_deposed_leader_cannot_write(store: Store) -> None:
    first = await store.acquire_lease("a#1", 30)
    assert first.lease is not None
    await store.apply(first.lease.epoch, [Op.node(node("n1")), Op.pod(pod("u1", "n1"))])
    # the lease lapses (a long pause) and another replica takes it
    await store.redis.delete(store.key("leader"))
    second = await store.acquire_lease("b#2", 30)
    assert second.lease is not None and second.lease.epoch == first.lease.epoch + 1
    before = await dump(store)
    with pytest.raises(FencedError):
        await store.apply(first.lease.epoch, [Op.delete_pod("u1"), Op.node(node("n2"))])
    with pytest.raises(FencedError):
        await store.mark_synced(first.lease.epoch, "stale")
    assert await dump(store) == before
    # the old leader's renew and release are refused too; the new holder is untouched
    assert not await store.renew_lease(first.lease, 30)
    assert not await store.release_lease(first.lease)
    assert await store.leader() == "b"
    await store.apply(second.lease.epoch, [Op.delete_pod("u1")])
    assert await store.placed_pods() == {}


async def test_the_lease_is_exclusive_until_released(store: Store) -> None:
    held = await store.acquire_lease("a#1", 30)
    assert held.lease is not None
    other = await store.acquire_lease("b#2", 30)
    assert other.lease is None and 0 < other.retry_ms <= 30_000 and other.holder == held.lease.value
    assert await store.renew_lease(held.lease, 30)
    assert await store.release_lease(held.lease)
    again = await store.acquire_lease("b#2", 30)
    assert again.lease is not None and again.lease.epoch == held.lease.epoch + 1


async def test_an_expired_lease_can_be_taken(store: Store) -> None:
    held = await store.acquire_lease("a#1", 0.05)
    assert held.lease is not None
    await asyncio.sleep(0.1)
    taken = await store.acquire_lease("b#2", 30)
    assert taken.lease is not None


def elector(store: Store, name: str, log: list[tuple[str, int]], lease: float) -> LeaderElector:
    async def work(epoch: int) -> None:
        log.append((name, epoch))
        await asyncio.Event().wait()  # runs until cancelled

    return LeaderElector(store, name, work, lease_seconds=lease)


async def wait_for(predicate: object, timeout: float) -> float:
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - started > timeout:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def test_one_leader_and_takeover_within_the_lease_after_a_crash(store: Store) -> None:
    lease = 0.6
    started: list[tuple[str, int]] = []
    electors = [elector(store, f"r{i}", started, lease) for i in range(3)]
    for e in electors:
        e.start()
    try:
        await wait_for(lambda: any(e.is_leader for e in electors), 2)
        await asyncio.sleep(lease)  # several renewals: still exactly one leader, one term
        leaders = [e for e in electors if e.is_leader]
        assert len(leaders) == 1 and len(started) == 1
        dead = leaders[0]
        assert await store.leader() == dead.replica_id

        async def no_release(_lease: object) -> bool:
            return False

        dead.store = Store(store.redis, store.prefix)
        dead.store.release_lease = no_release  # type: ignore[method-assign,assignment]
        await dead.stop()  # a crash: the lease is left to expire
        survivors = [e for e in electors if e is not dead]
        took = await wait_for(lambda: any(e.is_leader for e in survivors), lease + 0.5)
        assert took <= lease + 0.2
        assert sum(e.is_leader for e in survivors) == 1
        # The new leader's work is a task of its own: it starts a loop turn after is_leader flips.
        await wait_for(lambda: len(started) >= 2, 1.0)
        assert len(started) == 2 and started[1][1] == started[0][1] + 1
    finally:
        for e in electors:
            await e.stop()


async def test_losing_the_lease_stops_the_work_at_once(store: Store) -> None:
    stopped = asyncio.Event()

    async def work(epoch: int) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    e = LeaderElector(store, "a", work, lease_seconds=0.6)
    e.start()
    try:
        await wait_for(lambda: e.is_leader, 2)
        await store.redis.set(store.key("leader"), "thief#0|999", px=30_000)
        await asyncio.wait_for(stopped.wait(), timeout=0.6 / 3 + 0.3)
        assert not e.is_leader
        assert await store.leader() == "thief"  # stepping down does not release someone else's lease
    finally:
        await e.stop()


async def test_a_fenced_write_makes_the_leader_step_down(store: Store) -> None:
    terms: list[int] = []

    async def work(epoch: int) -> None:
        terms.append(epoch)
        if len(terms) == 1:
            await store.redis.incr(store.key("epoch"))  # someone else's term began
            await store.apply(epoch, [Op.node(node("n1"))])
        await asyncio.Event().wait()

    e = LeaderElector(store, "a", work, lease_seconds=0.6)
    e.start()
    try:
        # steps down at once, then (the lease still being its own) wins a fresh term
        await wait_for(lambda: len(terms) == 2, 2)
        assert terms[1] > terms[0] + 1 and e.is_leader and e.terms == 2
    finally:
        await e.stop()
    assert await store.leader() is None  # stop() released the lease


async def test_stop_releases_so_another_takes_over_at_once(store: Store) -> None:
    log: list[tuple[str, int]] = []
    a, b = elector(store, "a", log, 5.0), elector(store, "b", log, 5.0)
    a.start()
    await wait_for(lambda: a.is_leader, 2)
    b.start()
    try:
        await asyncio.sleep(0.1)
        assert not b.is_leader
        await a.stop()
        took = await wait_for(lambda: b.is_leader, 5.0 / 3 + 0.5)
        assert took < 5.0  # long before the lease would have expired
    finally:
        await b.stop()


async def test_work_that_swallowed_a_cancellation_still_stops(store: Store) -> None:
    """Python 3.11's wait_for can lose a cancellation; the watcher's loops re-raise it."""
    from extenders.aio import raise_if_cancelling

    loops_after_cancel = 0
    stopped = asyncio.Event()

    async def work(epoch: int) -> None:
        nonlocal loops_after_cancel
        try:
            while True:
                raise_if_cancelling()
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    loops_after_cancel += 1  # a library that eats the cancellation
        finally:
            stopped.set()

    e = LeaderElector(store, "a", work, lease_seconds=0.6)
    e.start()
    await wait_for(lambda: e.is_leader, 2)
    await asyncio.wait_for(e.stop(), timeout=2)
    assert stopped.is_set() and loops_after_cancel == 1
