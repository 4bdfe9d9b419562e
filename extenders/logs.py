"""Logging helpers shared by the engine: per-request fields, and failure lines that back off."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from types import MappingProxyType

# Fields every log line written while handling one request carries (verb, pod, gang, node).
CONTEXT_KEYS = ("verb", "pod", "gang", "node")

_fields: ContextVar[Mapping[str, str]] = ContextVar("log_fields", default=MappingProxyType({}))


@contextmanager
def log_fields(**fields: str | None) -> Iterator[None]:
    """Attach ``fields`` to every record logged inside the block (by this task and tasks it starts)."""
    merged = {**_fields.get(), **{k: v for k, v in fields.items() if v}}
    token = _fields.set(merged)
    try:
        yield
    finally:
        _fields.reset(token)


def current_fields() -> Mapping[str, str]:
    return _fields.get()


def detached(**fields: str) -> Context:
    """A context for a task that outlives the request starting it: only ``fields``, not the request's."""
    context = copy_context()
    context.run(_fields.set, fields)
    return context


class FailureLog:
    """One warning per outage instead of one per retry.

    A loop that retries every second would otherwise log every second while Redis or the API server
    is away. The first failure is logged at once, later ones at doubling intervals (with how many were
    left out), and the first success after them says the outage is over.
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        first_interval: float = 1.0,
        max_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.first_interval = first_interval
        self.max_interval = max_interval
        self.clock = clock
        self.failures = 0  # in the current outage
        self._suppressed = 0
        self._since = 0.0
        self._next_report = 0.0
        self._interval = first_interval

    def failed(self, detail: object) -> None:
        now = self.clock()
        self.failures += 1
        if self.failures == 1:
            self._since = now
            self._interval = self.first_interval
            self._next_report = now + self._interval
            self.logger.warning("%s failed: %s", self.what, detail)
            return
        if now < self._next_report:
            self._suppressed += 1
            return
        self._interval = min(self._interval * 2, self.max_interval)
        self._next_report = now + self._interval
        self.logger.warning(
            "%s still failing after %.0fs (%d failures, %d not logged, next report in %.0fs): %s",
            self.what,
            now - self._since,
            self.failures,
            self._suppressed,
            self._interval,
            detail,
        )
        self._suppressed = 0

    def succeeded(self) -> None:
        if self.failures:
            self.logger.info(
                "%s recovered after %d failures in %.0fs", self.what, self.failures, self.clock() - self._since
            )
        self.failures = 0
        self._suppressed = 0
