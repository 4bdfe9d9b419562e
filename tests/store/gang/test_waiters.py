"""Held calls end by their deadline even when Redis stops answering (a real Redis, paused)."""

from __future__ import annotations

import time

import redis.asyncio as aredis

from extenders.gang.config import GangConfig
from extenders.gang.state import ArriveStatus, GangStore
from extenders.gang.waiters import Outcome, Waiters
from extenders.sync.convert import pod_info
from extenders.sync.store import Store
from tests.gang_support import gpu_node, member, seed


async def test_a_hung_redis_call_does_not_hold_a_call_past_its_deadline(redis_url: str, redis_prefix: str) -> None:
    client = aredis.Redis.from_url(redis_url)
    admin = aredis.Redis.from_url(redis_url)
    config = GangConfig(arrival_lease_seconds=2.0, poll_interval_seconds=0.1)
    gangs = GangStore(client, redis_prefix, config)
    waiters = Waiters(gangs, config)
    try:
        await seed(Store(client, redis_prefix), [gpu_node("n1")])
        pod = pod_info(member("a-0", "a", 2))
        arrived = await gangs.arrive(
            "default/a", pod, "n1", None, token="t", replica="r1", window_seconds=30, minimum=2, score=1
        )
        assert arrived.status is ArriveStatus.WAIT
        await admin.client_pause(1500, all=True)  # every Redis call now hangs
        started = time.monotonic()
        waited = await waiters.wait("default/a", pod.uid, "t", timeout=0.3)
        elapsed = time.monotonic() - started
        assert waited.outcome is Outcome.ERROR and "gave up waiting" in waited.why
        assert elapsed < 1.2  # the deadline (0.3 s + margin), not the pause nor the 2 s lease
    finally:
        await admin.client_unpause()
        await waiters.stop()
        await client.aclose()
        await admin.aclose()
