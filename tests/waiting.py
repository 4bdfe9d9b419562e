"""Waiting for a condition instead of sleeping for a guessed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from devstack.replica import ServerProcess

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T | None]], timeout: float = 10.0) -> T:
    """``check()``'s first truthy answer, retried every 50 ms; an AssertionError it raises is retried
    too and re-raised at the deadline, so a failing check reports its own message."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = await check()
            if result:
                return result
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not reached within {timeout:g}s")
        await asyncio.sleep(0.05)


def readiness_with_reason(replica: ServerProcess, timeout: float = 10.0) -> dict[str, Any]:
    """The replica's /readyz body once it says why it is not ready (a refused Redis, say)."""
    deadline = time.monotonic() + timeout
    while "reason" not in (body := replica.get("/readyz").json()):
        assert time.monotonic() < deadline, body
        time.sleep(0.1)
    result: dict[str, Any] = body
    return result
