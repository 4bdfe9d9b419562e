"""Request fields on log records, and failure lines that back off while an outage lasts."""

from __future__ import annotations

import asyncio
import logging

import pytest

from extenders.logs import FailureLog, current_fields, detached, log_fields


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fields_nest_and_are_restored() -> None:
    assert current_fields() == {}
    with log_fields(verb="bind", pod="ns/a", node=None):
        assert current_fields() == {"verb": "bind", "pod": "ns/a"}
        with log_fields(gang="ns/g", node="n1"):
            assert current_fields() == {"verb": "bind", "pod": "ns/a", "gang": "ns/g", "node": "n1"}
        assert current_fields() == {"verb": "bind", "pod": "ns/a"}
    assert current_fields() == {}


async def test_a_detached_task_carries_only_its_own_fields() -> None:
    async def fields() -> dict[str, str]:
        return dict(current_fields())

    with log_fields(verb="bind", pod="ns/first-member"):
        inherited = await asyncio.create_task(fields())
        own = await asyncio.create_task(fields(), context=detached(gang="ns/g"))
    assert inherited == {"verb": "bind", "pod": "ns/first-member"}
    assert own == {"gang": "ns/g"}


def test_failures_are_logged_at_doubling_intervals_and_the_recovery_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    failures = FailureLog(logging.getLogger("t.backoff"), "gang sweep", max_interval=4.0, clock=clock)
    caplog.set_level(logging.INFO, logger="t.backoff")
    logged_at = []
    for step in range(121):  # a failure every 0.1 s for 12 s
        clock.now = 100.0 + step / 10
        before = len(caplog.records)
        failures.failed("connection refused")
        if len(caplog.records) > before:
            logged_at.append(round(clock.now - 100.0, 1))
    # at once, then 1, 2, 4, 4, ... seconds apart (capped)
    assert logged_at == [0.0, 1.0, 3.0, 7.0, 11.0]
    assert caplog.records[0].getMessage() == "gang sweep failed: connection refused"
    second = caplog.records[1].getMessage()
    assert second.startswith("gang sweep still failing after 1s (11 failures, 9 not logged, next report in 2s)")
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    caplog.clear()
    failures.succeeded()
    failures.succeeded()
    assert [r.getMessage() for r in caplog.records] == ["gang sweep recovered after 121 failures in 12s"]
    assert caplog.records[0].levelno == logging.INFO
    # a new outage starts over: logged at once
    caplog.clear()
    failures.failed("timeout")
    assert [r.getMessage() for r in caplog.records] == ["gang sweep failed: timeout"]
