"""asyncio helpers every long-running loop of a replica shares."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from extenders.logs import FailureLog

log = logging.getLogger(__name__)

T = TypeVar("T")


def cancelling() -> bool:
    """Whether the current task was asked to stop (a library may have swallowed the CancelledError)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a library swallowed (Python 3.11's wait_for can lose one in a race).

    The task's pending-cancel count survives the loss, so every long-running loop checks it:
    a deposed leader's watcher must stop, and ``stop()`` must not wait forever.
    """
    if cancelling():
        raise asyncio.CancelledError()


async def cancel_and_wait(task: asyncio.Task[Any], attempts: int = 50, interval: float = 0.2) -> None:
    """Cancel a task and wait for it, cancelling again if a cancellation was lost on the way."""
    for _ in range(attempts):
        if task.done():
            break
        task.cancel()
        await asyncio.wait([task], timeout=interval)
    if not task.done():
        log.error("task %s ignores cancellation; abandoning it", task.get_name())
    elif not task.cancelled():
        with contextlib.suppress(BaseException):
            task.result()


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait for ``event`` at most ``timeout`` seconds, then clear it; True when it was set (a wake-up)."""
    try:
        await asyncio.wait_for(event.wait(), timeout=max(timeout, 0.0))
        woken = True
    except TimeoutError:
        woken = False
    event.clear()
    return woken


async def poll_until(probe: Callable[[], Awaitable[T | None]], seconds: float, interval: float) -> T | None:
    """``probe``'s first answer that is not None, asked every ``interval`` (first after one interval)
    for ``seconds``; None when the time ran out. For waits on the watch, which has no event to await."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await asyncio.sleep(interval)
        found = await probe()
        if found is not None:
            return found
    return None


async def every(
    interval: float,
    step: Callable[[], Awaitable[Any]],
    failures: FailureLog,
    errors: tuple[type[BaseException], ...],
) -> None:
    """Run ``step`` every ``interval`` seconds until cancelled. The ``errors`` it raises are an outage
    (logged once by ``failures``, at doubling intervals while it lasts), never the end of the loop."""
    while True:
        await asyncio.sleep(interval)
        try:
            await step()
        except errors as exc:
            if cancelling():
                raise asyncio.CancelledError from exc  # stopping: a client turned it into an error
            failures.failed(exc)
            continue
        failures.succeeded()
