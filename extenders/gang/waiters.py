"""Held bind calls on this replica, woken by Redis pub/sub with polling as the fallback.

One poller task per gang (not per call) refreshes the leases and reservations of all of this
replica's held members of that gang in one script call and reads the gang's state; a pub/sub
message or a local arrival wakes it at once. A lost message therefore delays a wake-up by at
most one poll interval and never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis.asyncio as aredis
from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait, cancelling
from extenders.gang.config import GangConfig
from extenders.gang.state import GangStore
from extenders.logs import FailureLog, detached
from extenders.sync.redis_connect import reaches_primary

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    PERMITTED = "permitted"
    REJECTED = "rejected"
    LOST = "lost"  # the arrival is gone: its lease lapsed, its pod was deleted, or a newer call replaced it
    ERROR = "error"  # Redis stayed unreachable, or the wait outlived every deadline


@dataclass(slots=True, frozen=True)
class WaitResult:
    outcome: Outcome
    why: str = ""
    cool_ms: int = -1  # REJECTED: the cool-down that follows


@dataclass(slots=True)
class _Held:
    uid: str
    token: str
    deadline: float  # monotonic: give up even if Redis never answers
    future: asyncio.Future[WaitResult]


@dataclass(slots=True)
class _Gang:
    key: str
    held: dict[str, _Held] = field(default_factory=dict)  # by token
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Waiters:
    def __init__(self, store: GangStore, config: GangConfig) -> None:
        self.store = store
        self.config = config
        self._gangs: dict[str, _Gang] = {}

    async def wait(self, gang: str, uid: str, token: str, timeout: float) -> WaitResult:
        """Block until the gang is permitted or rejected, or this arrival is lost."""
        loop = asyncio.get_running_loop()
        entry = self._gangs.get(gang)
        if entry is None:
            entry = self._gangs[gang] = _Gang(gang)
        held = _Held(uid, token, time.monotonic() + timeout, loop.create_future())
        entry.held[token] = held
        if entry.task is None or entry.task.done():
            entry.task = asyncio.create_task(self._poll(entry), name=f"gang-poll-{gang}", context=detached(gang=gang))
        else:
            entry.wake.set()
        try:
            # The poller decides; this bound only matters when it cannot (a Redis call hanging):
            # the held call still ends by its deadline.
            return await asyncio.wait_for(asyncio.shield(held.future), timeout=max(timeout, 0.0) + 0.5)
        except TimeoutError:
            if held.future.done():
                return held.future.result()
            why = f"gang {gang}: gave up waiting for a decision (Redis did not answer in time)"
            held.future.set_result(WaitResult(Outcome.ERROR, why))
            return held.future.result()
        finally:
            entry.held.pop(token, None)
            if not entry.held and (entry.task is None or entry.task.done()) and self._gangs.get(gang) is entry:
                del self._gangs[gang]

    def held_count(self) -> int:
        """Bind calls held on this replica now (a metric)."""
        return sum(len(entry.held) for entry in self._gangs.values())

    def wake(self, gang: str) -> None:
        entry = self._gangs.get(gang)
        if entry is not None:
            entry.wake.set()

    async def stop(self) -> None:
        tasks = [g.task for g in self._gangs.values() if g.task is not None]
        for task in tasks:
            await cancel_and_wait(task)
        for entry in self._gangs.values():
            for held in entry.held.values():
                if not held.future.done():
                    held.future.set_result(WaitResult(Outcome.ERROR, "the extender replica is shutting down"))
        self._gangs.clear()

    async def _poll(self, entry: _Gang) -> None:
        interval = self.config.poll_interval_seconds
        lease = self.config.arrival_lease_seconds
        last_ok = time.monotonic()
        failures = FailureLog(log, f"gang {entry.key}: polling Redis")
        try:
            while entry.held:
                entry.wake.clear()
                pending = [h for h in entry.held.values() if not h.future.done()]
                if not pending:
                    break
                sleep = interval
                try:
                    # A hung call counts as a failed one, so the lease check below still runs.
                    result = await asyncio.wait_for(
                        self.store.poll(entry.key, [(h.uid, h.token) for h in pending]), timeout=lease
                    )
                    last_ok = time.monotonic()
                    failures.succeeded()
                except (RedisError, OSError, TimeoutError) as exc:
                    if cancelling():
                        raise asyncio.CancelledError from exc
                    detail = str(exc) or type(exc).__name__
                    failures.failed(detail)
                    if time.monotonic() - last_ok > lease:
                        why = f"gang {entry.key}: Redis unreachable for longer than the arrival lease ({detail})"
                        for h in pending:
                            if not h.future.done():
                                h.future.set_result(WaitResult(Outcome.ERROR, why))
                        break
                    await self._sleep(entry, min(interval, 0.2))
                    continue
                now = time.monotonic()
                for h, mine in zip(pending, result.mine, strict=True):
                    if h.future.done():  # its wait ended meanwhile (deadline passed while polling)
                        continue
                    if result.state == "rejected":
                        h.future.set_result(WaitResult(Outcome.REJECTED, result.why, result.cool_ms))
                    elif not mine:
                        h.future.set_result(WaitResult(Outcome.LOST, _lost(entry.key, h.uid, result.why)))
                    elif result.state == "permitted":
                        h.future.set_result(WaitResult(Outcome.PERMITTED))
                    elif now >= h.deadline:
                        why = f"gang {entry.key}: gave up waiting for a decision"
                        h.future.set_result(WaitResult(Outcome.ERROR, why))
                if result.state == "" and result.window_ms >= 0:
                    # Wake just after the window closes, so the rejection is not a poll late.
                    sleep = min(sleep, result.window_ms / 1000 + 0.005)
                await self._sleep(entry, sleep)
        finally:
            if self._gangs.get(entry.key) is entry and not entry.held:
                del self._gangs[entry.key]

    @staticmethod
    async def _sleep(entry: _Gang, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(entry.wake.wait(), timeout=max(seconds, 0.001))


def _lost(gang: str, uid: str, released: str) -> str:
    """Why a held call's arrival is gone: the reconciler's reason when it released the gang."""
    if released:
        return f"{released}; the arrival of {uid} was released"
    return (
        f"gang {gang}: the arrival of {uid} is gone (its lease lapsed, its pod was deleted, its node "
        "was deleted or its reservation expired, or a newer call replaced it)"
    )


class GangEvents:
    """Subscribes to the gang channels: wakes local pollers, and the nudger when a nudge is due;
    reconnects on its own."""

    def __init__(
        self,
        redis: aredis.Redis,
        channel: str,
        waiters: Waiters,
        nudge_channel: str = "",
        on_nudge: Callable[[], None] | None = None,
    ) -> None:
        self.redis = redis
        self.channel = channel
        self.waiters = waiters
        self.nudge_channel = nudge_channel
        self.on_nudge = on_nudge
        self.connected = asyncio.Event()
        self.messages = 0

    async def run(self) -> None:
        backoff = 0.1
        failures = FailureLog(log, "gang pub/sub (polling covers while it is down)")
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            pool = self.redis.connection_pool
            try:
                channels = [self.channel] + ([self.nudge_channel] if self.on_nudge and self.nudge_channel else [])
                await pubsub.subscribe(*channels)
                self.connected.set()
                failures.succeeded()
                backoff = 0.1
                nudges = self.nudge_channel.encode()
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        if pubsub.connection is not None and not reaches_primary(pool, pubsub.connection):
                            break  # Sentinel named another primary: subscribe there
                        continue
                    if self.on_nudge is not None and message.get("channel") == nudges:
                        self.on_nudge()
                        continue
                    data = message.get("data")
                    gang = data.decode() if isinstance(data, bytes) else str(data)
                    self.messages += 1
                    self.waiters.wake(gang)
            except (RedisError, OSError) as exc:
                self.connected.clear()
                if cancelling():
                    # The client may turn our cancellation into a connection error: stop anyway.
                    raise asyncio.CancelledError from exc
                failures.failed(exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]


class DoneBatcher:
    """Coalesces the end-of-call writes of members released together: one script call per gang
    in flight at a time, carrying every call that ended meanwhile (instead of one per member)."""

    def __init__(self, store: GangStore) -> None:
        self.store = store
        self._pending: dict[str, list[tuple[str, str, bool, asyncio.Future[bool]]]] = {}
        self._flushing: dict[str, asyncio.Task[None]] = {}

    async def done(self, gang: str, uid: str, token: str, bound: bool) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(gang, []).append((uid, token, bound, future))
        if gang not in self._flushing:
            self._flushing[gang] = asyncio.create_task(
                self._flush(gang), name=f"gang-done-{gang}", context=detached(gang=gang)
            )
        return await asyncio.shield(future)

    async def _flush(self, gang: str) -> None:
        try:
            await asyncio.sleep(0)  # let the calls released in the same turn join the batch
            while batch := self._pending.pop(gang, None):
                try:
                    results = await self.store.done_many(gang, [(u, t, b) for u, t, b, _ in batch])
                except Exception as exc:  # handed to every waiting call
                    for *_, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (*_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._flushing.pop(gang, None)
