"""Admission by priority against a real Redis: the more important gang assembles first, and takes the
slot of a less important one that has bound nothing yet."""

from __future__ import annotations

from extenders.gang.state import ArriveStatus, FilterStatus
from extenders.sync.store import Store
from tests.gang_support import gpu_node, seed
from tests.store.gang.scripts import arrive, gangs, pods
from tests.store.gang.test_nudges import me


async def test_a_higher_priority_gang_is_admitted_before_older_lower_ones(store: Store) -> None:
    g = gangs(store)
    (a0,) = pods("a", 1, 2)
    (b0,) = pods("b", 1, 2)
    (c0,) = pods("c", 1, 2)
    (d0,) = pods("d", 1, 2)
    assert (await g.filter("default/a", True, 10, 2, me(a0), priority=1000)).status is FilterStatus.ADMITTED
    # Queued behind a: b (old, low), c (newer, higher), d (newest, higher).
    queued = [
        await g.filter(f"default/{x}", True, s, 2, me(p), priority=pr)
        for x, s, p, pr in (("b", 20, b0, 1), ("c", 30, c0, 100), ("d", 40, d0, 100))
    ]
    assert [q.position for q in queued] == [1, 1, 2]  # each as it came: c then d go before b
    _, records = await g.read(["default/b", "default/c", "default/d"])
    assert {r.key: r.queue_position for r in records} == {"default/c": 1, "default/d": 2, "default/b": 3}


async def test_a_higher_priority_gang_takes_the_slot_of_a_lower_one_that_has_bound_nothing(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    low = pods("low", 2, 2)
    (high0,) = pods("high", 1, 2)
    assert (await g.filter("default/low", True, 10, 2, me(low[0]), priority=1)).status is FilterStatus.ADMITTED
    held = await arrive(g, low[0], "n1", 2, priority=1)
    assert held.status is ArriveStatus.WAIT
    state = await g.filter("default/high", True, 50, 2, me(high0), priority=100)
    assert state.status is FilterStatus.ADMITTED
    # The low gang's held member lost its arrival and reservation, with the reason; it queues again.
    polled = await g.poll("default/low", [(low[0].uid, "t")])
    assert polled.mine == [False] and "gave its turn to the higher-priority gang default/high" in polled.why
    assert await store.placed_pods() == {}
    _, (record,) = await g.read(["default/low"])
    assert (record.admitted, record.queue_position) == (False, 1)
    assert (await g.filter("default/low", True, 10, 2, me(low[1]), priority=1)).status is FilterStatus.QUEUED


async def test_a_gang_with_a_member_bound_or_of_equal_priority_keeps_its_slot(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    same = pods("same", 2, 2)
    (other0,) = pods("other", 1, 2)
    assert (await g.filter("default/same", True, 10, 2, me(same[0]), priority=5)).status is FilterStatus.ADMITTED
    await arrive(g, same[0], "n1", 2, priority=5)
    state = await g.filter("default/other", True, 50, 2, me(other0), priority=5)
    assert (state.status, state.position) == (FilterStatus.QUEUED, 1)
    # A gang being permitted (its bound members count) is never displaced, whatever comes.
    assert (await arrive(g, same[1], "n1", 2, priority=5)).status is ArriveStatus.PERMITTED
    (top0,) = pods("top", 1, 2)
    assert (await g.filter("default/top", True, 60, 2, me(top0), priority=1000)).status is FilterStatus.ADMITTED
    polled = await g.poll("default/same", [(same[0].uid, "t")])
    assert polled.state == "permitted" and polled.mine == [True]
