"""Waiting for a condition in asyncio tests, instead of sleeping for a guessed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
