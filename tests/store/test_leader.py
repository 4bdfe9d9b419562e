"""Leader work that keeps failing is restarted with an exponential (capped) delay, keeping the lease."""

from __future__ import annotations

import asyncio
import itertools
import time

from extenders.sync.leader import LeaderElector
from extenders.sync.store import Store


async def test_failing_work_restarts_with_growing_delays_and_the_lease_is_kept(store: Store) -> None:
    starts: list[float] = []

    async def work(epoch: int) -> None:
        starts.append(time.monotonic())
        raise AttributeError("'list' object has no attribute 'get'")  # a bug, not a fenced write

    e = LeaderElector(store, "a", work, lease_seconds=0.6, restart_delay=0.05, max_restart_delay=0.4)
    e.start()
    try:
        await asyncio.sleep(2.0)
        assert e.is_leader and e.terms == 1  # never stepped down while waiting out the delays
        assert await store.leader() == "a"
    finally:
        await e.stop()
    # a fixed 50 ms delay would have restarted it ~40 times; 50+100+200+400+400... ms is ~7
    assert 4 <= len(starts) <= 9, starts
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] < 0.3 and max(gaps) >= 0.35  # it grew to the cap
    assert max(gaps) < 0.4 + 0.6 / 3 + 0.15  # and stayed there (plus one renewal wait)
    assert e.work_restarts >= len(starts) - 1


async def test_a_long_healthy_run_resets_the_delay(store: Store) -> None:
    starts: list[float] = []

    async def work(epoch: int) -> None:
        starts.append(time.monotonic())
        if len(starts) == 4:
            await asyncio.sleep(0.5)  # ran longer than the cap: healthy
        raise RuntimeError("boom")

    e = LeaderElector(store, "a", work, lease_seconds=0.6, restart_delay=0.05, max_restart_delay=0.3)
    e.start()
    try:
        deadline = time.monotonic() + 3
        while len(starts) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await e.stop()
    assert len(starts) >= 6
    # the restart after the healthy run waited the initial delay again (not the capped one)
    after_healthy = starts[4] - (starts[3] + 0.5)
    assert after_healthy < 0.2 + 0.05, after_healthy
