"""``poll_until``: the shared wait on the watch (a preemptor's bind, a repeated preemption)."""

from __future__ import annotations

import asyncio
import time

from extenders.aio import poll_until


def test_poll_until_returns_the_first_answer_and_stops_asking() -> None:
    asked: list[int] = []

    async def probe() -> str | None:
        asked.append(1)
        return "seen" if len(asked) == 3 else None

    assert asyncio.run(poll_until(probe, seconds=5.0, interval=0.01)) == "seen"
    assert len(asked) == 3


def test_poll_until_gives_up_with_none_once_the_time_ran_out() -> None:
    async def never() -> str | None:
        return None

    started = time.monotonic()
    assert asyncio.run(poll_until(never, seconds=0.1, interval=0.02)) is None
    assert 0.1 <= time.monotonic() - started < 1.0
