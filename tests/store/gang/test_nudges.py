"""Parking and nudging gang members, and orphaned reservations, against a real Redis.

kube-scheduler parks a pod that filter turns away as unschedulable; these scripts remember such
members and say when to requeue them (their sibling was let through, an assembling slot came
free, a cool-down ended, lapsed arrivals released their reservations).
"""

from __future__ import annotations

import asyncio

from extenders.gang.state import ArriveStatus, FilterStatus, GangStore
from extenders.model import PodInfo
from extenders.sync.store import Store
from tests.gang_support import gpu_node, seed
from tests.store.gang.scripts import arrive, gangs, pods


def me(pod: PodInfo) -> tuple[str, str]:
    return pod.uid, pod.key


async def test_members_turned_away_are_parked_and_the_first_let_through_nudges_them(store: Store) -> None:
    g = gangs(store)
    a0, a1, a2 = pods("a", 3, 3)
    assert (await g.filter("default/a", False, 10, 3, me(a0))).status is FilterStatus.UNREADY
    assert (await g.filter("default/a", False, 10, 3, me(a1))).status is FilterStatus.UNREADY
    assert await g.take_nudges() == []  # nothing changed for them yet
    assert (await g.filter("default/a", True, 10, 3, me(a2))).status is FilterStatus.ADMITTED
    nudges = await g.take_nudges()
    assert nudges == [("default/a", sorted([me(a0), me(a1)], key=lambda m: m[1]))]
    assert await g.take_nudges() == []  # handed out once


async def test_check_decides_without_the_capacity_check_once_the_gang_is_admitted(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a0, a1 = pods("a", 2, 2)
    assert (await g.check("default/a", me(a0))).status is FilterStatus.CHECK
    assert (await g.filter("default/a", True, 10, 2, me(a0))).status is FilterStatus.ADMITTED
    # The next member's filter comes while the first is on its way to bind: no check needed.
    assert (await g.check("default/a", me(a1))).status is FilterStatus.ADMITTED
    await arrive(g, a0, "n1", 2)
    assert (await arrive(g, a1, "n1", 2)).status is ArriveStatus.PERMITTED
    assert (await g.check("default/a", me(a1))).status is FilterStatus.PERMITTED


async def test_a_queued_gang_is_nudged_when_the_assembling_slot_comes_free(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a0, a1 = pods("a", 2, 2)
    (b0,) = pods("b", 1, 2)
    assert (await g.filter("default/a", True, 10, 2, me(a0))).status is FilterStatus.ADMITTED
    assert (await g.filter("default/b", True, 50, 2, me(b0))).status is FilterStatus.QUEUED
    assert await g.take_nudges() == []
    await arrive(g, a0, "n1", 2)
    assert (await arrive(g, a1, "n1", 2)).status is ArriveStatus.PERMITTED
    assert await g.take_nudges() == [("default/b", [me(b0)])]


async def test_a_rejected_gang_is_nudged_when_its_cool_down_ends(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, cooldown_seconds=0.4)
    a0, a1 = pods("a", 2, 2)
    await arrive(g, a0, "n1", 2, window=0.1)
    await asyncio.sleep(0.15)
    # a1 comes while the gang cools down: turned away and parked.
    assert (await g.check("default/a", me(a1))).status is FilterStatus.COOLING
    assert await g.take_nudges() == []
    await asyncio.sleep(0.5)
    assert await g.take_nudges() == [("default/a", [me(a1)])]


async def test_lapsed_arrivals_nudge_members_turned_away_while_they_stood(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, arrival_lease_seconds=0.2)
    a0, a1 = pods("a", 2, 3)
    await arrive(g, a0, "n1", 3)
    await g.park("default/a", me(a1))  # failed the node predicates: a0's reservation was in the way
    assert await g.take_nudges() == []
    await asyncio.sleep(0.25)
    await g.sweep()  # a0's replica stopped refreshing its lease
    assert await g.take_nudges() == [("default/a", [me(a1)])]
    assert await store.placed_pods() == {}


async def test_nudges_due_now_are_announced_on_the_channel(store: Store) -> None:
    g = gangs(store)
    a0, a1 = pods("a", 2, 2)
    pubsub = store.redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(g.nudge_channel)
    try:
        await g.filter("default/a", False, 10, 2, me(a0))
        await g.filter("default/a", True, 10, 2, me(a1))
        message = None
        for _ in range(20):  # the subscribe confirmation reads as None first
            message = await pubsub.get_message(timeout=0.2)
            if message is not None:
                break
        assert message is not None and message["data"] == b"default/a"
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]


async def test_an_orphaned_arrival_is_released_but_not_once_the_gang_is_permitted(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a0, a1, a2 = pods("a", 3, 2)
    await arrive(g, a0, "n1", 2)
    assert await g.release_orphan("default/a", a0.uid)
    assert await store.placed_pods() == {}
    _, records = await g.read(["default/a"])
    assert records[0].arrivals == {}
    assert not await g.release_orphan("default/a", a0.uid)  # nothing left to release
    await arrive(g, a1, "n1", 2)
    assert (await arrive(g, a2, "n1", 2)).status is ArriveStatus.PERMITTED
    assert not await g.release_orphan("default/a", a1.uid)  # a permitted member must bind
    assert set(await store.placed_pods()) == {a1.uid, a2.uid}


async def test_sweeping_an_idle_gang_deletes_its_parked_members_and_nudges(store: Store) -> None:
    g: GangStore = gangs(store, idle_seconds=0.1)
    (a0,) = pods("a", 1, 2)
    await g.filter("default/a", False, 10, 2, me(a0))
    await asyncio.sleep(0.15)
    assert await g.sweep() == ["default/a"]
    leftovers = [k async for k in store.redis.scan_iter(f"{store.prefix}:gang*")]
    assert leftovers == []


async def test_the_sweep_takes_the_slot_of_an_admitted_gang_nothing_arrived_for(store: Store) -> None:
    """No member of the gang queued behind may reach filter to notice (kube-scheduler parks them):
    the sweep itself yields the overstayed slot and nudges the queue's head."""
    g = gangs(store, queue_idle_seconds=0.2)
    (a0,) = pods("a", 1, 2)
    (b0,) = pods("b", 1, 2)
    assert (await g.filter("default/a", True, 10, 2, me(a0))).status is FilterStatus.ADMITTED
    assert (await g.filter("default/b", True, 50, 2, me(b0))).status is FilterStatus.QUEUED
    await g.sweep()
    assert await g.take_nudges() == []  # not overstayed yet
    await asyncio.sleep(0.25)
    await g.sweep()
    assert await g.take_nudges() == [("default/b", [me(b0)])]
    _, (record,) = await g.read(["default/a"])
    assert not record.admitted


async def test_each_rejection_in_a_row_doubles_the_cool_down_and_a_permit_resets_it(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, cooldown_seconds=0.2, cooldown_max_seconds=0.5)
    a0, a1 = pods("a", 2, 2)
    cools = []
    for _ in range(3):
        assert (await arrive(g, a0, "n1", 2, window=0.05)).status is ArriveStatus.WAIT
        await asyncio.sleep(0.07)
        state = await g.check("default/a", me(a1))
        assert state.status is FilterStatus.COOLING
        cools.append(state.ms_left)
        while (await g.check("default/a", me(a1))).status is FilterStatus.COOLING:
            await asyncio.sleep(0.02)
    assert 150 <= cools[0] <= 200 and 350 <= cools[1] <= 400 and 450 <= cools[2] <= 500  # 0.2, 0.4, capped 0.5
    await arrive(g, a0, "n1", 2)
    assert (await arrive(g, a1, "n1", 2)).status is ArriveStatus.PERMITTED
    fields = (await g.read(["default/a"]))[1][0].fields
    assert "rejections" not in fields
