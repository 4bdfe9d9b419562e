"""The gang Lua scripts against a real Redis: admission to the assembling set, its queue, and the sweep."""

from __future__ import annotations

import asyncio

from extenders.gang.state import ArriveStatus, FilterStatus
from extenders.sync.convert import pod_info
from extenders.sync.store import Store
from tests.gang_support import gpu_node, member, seed
from tests.store.gang.scripts import arrive, gangs, pods


async def test_admission_is_first_come_by_creation_and_bounded(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    assert (await g.filter("default/b", True, 50, 2)).status is FilterStatus.ADMITTED
    queued = await g.filter("default/a", True, 10, 2)  # older, but b got the only slot first
    assert queued.status is FilterStatus.QUEUED and queued.position == 1 and queued.assembling == ("default/b",)
    c = await g.filter("default/c", True, 5, 2)  # oldest of all: goes ahead of a in the queue
    assert c.status is FilterStatus.QUEUED and c.position == 1
    assert (await g.filter("default/a", True, 10, 2)).position == 2
    # a's member tries to bind anyway: not admitted, nothing reserved
    pod = pod_info(member("a-0", "a", 2))
    result = await arrive(g, pod, "n1", 2, score=10)
    assert result.status is ArriveStatus.NOT_ADMITTED and await store.placed_pods() == {}
    # b completes: it leaves the assembling set and the head of the queue gets the slot
    b0, b1 = pods("b", 2, 2)
    await arrive(g, b0, "n1", 2, score=50)
    assert (await arrive(g, b1, "n1", 2, score=50)).status is ArriveStatus.PERMITTED
    assert (await g.filter("default/a", True, 10, 2)).status is FilterStatus.QUEUED
    assert (await g.filter("default/c", True, 5, 2)).status is FilterStatus.ADMITTED
    assert (await g.filter("default/b", True, 50, 2)).status is FilterStatus.PERMITTED


async def test_unready_gang_gives_up_its_place(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    assert (await g.filter("default/a", True, 10, 2)).status is FilterStatus.ADMITTED
    assert (await g.filter("default/a", False, 10, 2)).status is FilterStatus.UNREADY
    assert (await g.filter("default/b", True, 50, 2)).status is FilterStatus.ADMITTED


async def test_idle_queue_entries_and_admissions_lapse(store: Store) -> None:
    g = gangs(store, queue_idle_seconds=0.15)
    assert (await g.filter("default/a", True, 10, 2)).status is FilterStatus.ADMITTED
    assert (await g.filter("default/b", True, 50, 2)).status is FilterStatus.QUEUED
    await asyncio.sleep(0.2)
    # a was admitted but nobody came back for it: b takes the slot
    assert (await g.filter("default/b", True, 50, 2)).status is FilterStatus.ADMITTED


async def test_sweep_deletes_idle_gangs(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, idle_seconds=0.2)
    a0, a1 = pods("a", 2, 2)
    await arrive(g, a0, "n1", 2)
    await arrive(g, a1, "n1", 2)
    await g.done("default/a", a0.uid, "t", bound=True)
    await g.done("default/a", a1.uid, "t", bound=True)
    await g.filter("default/q", True, 10, 2)
    assert await g.sweep() == []
    await asyncio.sleep(0.25)
    assert sorted(await g.sweep()) == ["default/a", "default/q"]
    _, records = await g.read()
    assert records == []
    # The decisions journal is one capped stream for every gang, not bookkeeping of any one of them.
    journal = f"{store.prefix}:gangjournal".encode()
    leftovers = [k async for k in store.redis.scan_iter(f"{store.prefix}:gang*") if k != journal]
    assert leftovers == []


async def test_sweep_closes_windows_nobody_polls_and_visits_only_active_gangs(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, max_assembling=2)
    members = pods("a", 2, 3)
    for m in members:
        await arrive(g, m, "n1", 3, window=0.15)
    done_gang = pods("b", 2, 2)
    assert [(await arrive(g, m, "n1", 2)).status for m in done_gang] == [ArriveStatus.WAIT, ArriveStatus.PERMITTED]
    assert await g.done_many("default/b", [(m.uid, "t", True) for m in done_gang]) == [True, True]
    raw = await store.redis.smembers(f"{store.prefix}:gangactive")
    active = {k.decode() if isinstance(k, bytes) else k for k in raw}
    assert active == {"default/a"}  # b is bound: no lease left to watch
    await asyncio.sleep(0.2)
    await g.sweep()
    _, records = await g.read(["default/a"])
    assert records[0].fields["state"] == "rejected" and records[0].arrivals == {}
    assert set(await store.placed_pods()) == {m.uid for m in done_gang}
    assert await store.redis.smembers(f"{store.prefix}:gangactive") == set()


async def test_an_admitted_gang_nothing_arrives_for_yields_its_slot(store: Store) -> None:
    g = gangs(store, queue_idle_seconds=0.3)
    assert (await g.filter("default/a", True, 10, 2)).status is FilterStatus.ADMITTED
    # a's members keep passing filter but never reach bind; c (younger) waits behind it.
    for _ in range(2):
        assert (await g.filter("default/c", True, 50, 2)).status is FilterStatus.QUEUED
        assert (await g.filter("default/a", True, 10, 2)).status is FilterStatus.ADMITTED
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.15)
    assert (await g.filter("default/c", True, 50, 2)).status is FilterStatus.ADMITTED
    behind = await g.filter("default/a", True, 10, 2)  # older, but it had its turn: back of the queue
    assert behind.status is FilterStatus.QUEUED and behind.position == 1 and behind.assembling == ("default/c",)
    d = await g.filter("default/d", True, 30, 2)
    assert d.status is FilterStatus.QUEUED and d.position == 1  # ahead of a, despite a's older score
    assert (await g.filter("default/a", True, 10, 2)).position == 2


async def test_an_admitted_gang_with_members_held_keeps_its_slot(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, queue_idle_seconds=0.2)
    a0 = pods("a", 1, 3)[0]
    assert (await arrive(g, a0, "n1", 3, score=10)).status is ArriveStatus.WAIT
    await asyncio.sleep(0.3)
    assert (await g.filter("default/c", True, 50, 2)).status is FilterStatus.QUEUED
    assert (await g.filter("default/a", True, 10, 3)).status is FilterStatus.ADMITTED
