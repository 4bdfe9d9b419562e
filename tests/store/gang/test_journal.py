"""The decisions journal against a real Redis: each decision once, in order, resumed by a new reader."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import redis.asyncio as aredis

from extenders.aio import cancel_and_wait
from extenders.gang.journal import ADMITTED, PERMITTED, REJECTED, Decision, GangJournal
from extenders.sync.store import Store
from tests.gang_support import gpu_node, seed
from tests.store.gang.scripts import arrive, gangs, pods
from tests.waiting import eventually


def count_reaches(seen: list[Decision], n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(seen) >= n

    return check


async def follow(redis: aredis.Redis, prefix: str, seen: list[Decision]) -> asyncio.Task[None]:
    async def handle(decision: Decision) -> None:
        seen.append(decision)

    journal = GangJournal(redis, prefix, handle, block_ms=50)
    task = asyncio.create_task(journal.run())
    await asyncio.sleep(0.2)  # it pins its start position before the decisions below
    return task


async def test_admission_permit_and_rejection_are_journaled_once_with_their_times(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, cooldown_seconds=0.5)
    seen: list[Decision] = []
    task = await follow(store.redis, store.prefix, seen)
    try:
        ok = pods("ok", 2, 2)
        for m in ok:
            await arrive(g, m, "n1", 2)
        short = pods("short", 1, 2)
        await arrive(g, short[0], "n1", 2, window=0.1)
        await asyncio.sleep(0.2)
        await g.sweep()
        await eventually(count_reaches(seen, 4))
        await asyncio.sleep(0.2)
    finally:
        await cancel_and_wait(task)
    kinds = [(d.gang, d.kind) for d in seen]
    assert kinds == [
        ("default/ok", ADMITTED),
        ("default/ok", PERMITTED),
        ("default/short", ADMITTED),
        ("default/short", REJECTED),
    ]
    permitted, rejected = seen[1], seen[3]
    assert permitted.window_seconds is not None and 0 <= permitted.window_seconds < 5
    assert permitted.since_admission_seconds is not None and permitted.since_admission_seconds >= 0
    assert rejected.window_seconds is not None and rejected.window_seconds >= 0.1
    assert "only 1 of the 2 required members" in rejected.why and rejected.cool_ms == 500


async def test_a_new_reader_resumes_after_what_the_last_one_read(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    first: list[Decision] = []
    task = await follow(store.redis, store.prefix, first)
    try:
        for m in pods("a", 2, 2):
            await arrive(g, m, "n1", 2)
        await eventually(count_reaches(first, 2))
    finally:
        await cancel_and_wait(task)
    # Decided while nobody read: the next leader reports it, and nothing already reported.
    for m in pods("b", 2, 2):
        await arrive(g, m, "n1", 2)
    second: list[Decision] = []
    task = await follow(store.redis, store.prefix, second)
    try:
        await eventually(count_reaches(second, 2))
        await asyncio.sleep(0.2)
    finally:
        await cancel_and_wait(task)
    assert [(d.gang, d.kind) for d in second] == [("default/b", ADMITTED), ("default/b", PERMITTED)]
