"""Leader election over a Redis lease, so exactly one replica runs the watcher.

The lease is ``P:leader = holder|epoch`` with a TTL; acquiring it starts a new fencing
epoch, renewing and releasing are compare-and-set. The leader renews every third of the
lease; it steps down (cancelling its work at once) when a renewal finds the lease gone or
someone else's, when its work hits a fenced write, or when it could not renew for two thirds
of the lease (Redis unreachable: the lease may be expiring). Candidates retry as soon as the
current lease would run out, so a dead leader is replaced within the lease time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

from redis.exceptions import RedisError

from extenders.aio import cancel_and_wait, raise_if_cancelling
from extenders.logs import FailureLog
from extenders.sync.store import FencedError, Lease, Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

Work = Callable[[int], Coroutine[Any, Any, None]]


def _is_fenced(exc: BaseException) -> bool:
    if isinstance(exc, FencedError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_fenced(e) for e in exc.exceptions)
    return False


class LeaderElector:
    """Campaigns for the lease and runs ``work(epoch)`` for as long as it is held."""

    def __init__(
        self,
        store: Store,
        replica_id: str,
        work: Work,
        lease_seconds: float = 15.0,
        restart_delay: float = 1.0,
        max_restart_delay: float = 60.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.telemetry = telemetry or Telemetry()
        self.replica_id = replica_id
        self.holder = f"{replica_id}#{secrets.token_hex(4)}"
        self.work = work
        self.lease_seconds = lease_seconds
        self.renew_interval = lease_seconds / 3
        self.restart_delay = restart_delay
        self.max_restart_delay = max_restart_delay
        self.work_restarts = 0  # restarts of the work after it failed, over this replica's life
        self.terms = 0  # leadership terms won by this replica
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None
        self._failures = FailureLog(log, "leader election (Redis)")

    @property
    def is_leader(self) -> bool:
        return self._lease is not None

    @property
    def epoch(self) -> int:
        return self._lease.epoch if self._lease else 0

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="leader-election")
        return self._task

    async def stop(self) -> None:
        """Stop campaigning; a held lease is released so another replica takes over at once."""
        task, self._task = self._task, None
        if task is not None:
            # a long interval: a re-cancel must not interrupt the release in the task's clean-up
            await cancel_and_wait(task, attempts=10, interval=1.0)

    async def run(self) -> None:
        while True:
            raise_if_cancelling()
            try:
                attempt = await self.store.acquire_lease(self.holder, self.lease_seconds)
            except RedisError as exc:
                self._failures.failed(exc)
                await asyncio.sleep(self.renew_interval)
                continue
            self._failures.succeeded()
            if attempt.lease is None:
                # Wake up just after the holder's lease would lapse, but re-check at least every interval.
                wait = min(self.renew_interval, attempt.retry_ms / 1000 + 0.01) if attempt.retry_ms > 0 else 0.05
                await asyncio.sleep(max(wait, 0.01))
                continue
            await self._lead(attempt.lease)

    def _start_work(self, lease: Lease) -> asyncio.Task[None]:
        return asyncio.create_task(self.work(lease.epoch), name=f"leader-work-{lease.epoch}")

    async def _lead(self, lease: Lease) -> None:
        self._lease = lease
        self.terms += 1
        self.telemetry.leader_transitions.labels("acquired").inc()
        log.info("replica %s is the leader (epoch %d)", self.replica_id, lease.epoch)
        last_renewed = time.monotonic()
        work: asyncio.Task[None] | None = self._start_work(lease)
        started = time.monotonic()
        failures = 0  # consecutive quick failures of the work: the restart delay doubles with each
        restart_at = 0.0
        released = False
        try:
            while True:
                raise_if_cancelling()
                if work is None:
                    # Waiting out a restart delay; the lease is still renewed meanwhile.
                    wait = restart_at - time.monotonic()
                    if wait <= 0:
                        work, started = self._start_work(lease), time.monotonic()
                    else:
                        await asyncio.sleep(min(wait, self.renew_interval))
                if work is not None:
                    done, _ = await asyncio.wait([work], timeout=self.renew_interval)
                    if work in done:
                        exc = None if work.cancelled() else work.exception()
                        if exc is not None and _is_fenced(exc):
                            log.warning("leader %s fenced out (epoch %d): stepping down", self.replica_id, lease.epoch)
                            return
                        # Work that ran for a good while was healthy: start the backoff over.
                        failures = 1 if time.monotonic() - started > self.max_restart_delay else failures + 1
                        delay = min(self.max_restart_delay, self.restart_delay * 2.0 ** (failures - 1))
                        self.work_restarts += 1
                        log.error("leader work ended (%r); restarting it in %.1fs", exc, delay)
                        work, restart_at = None, time.monotonic() + delay
                sent = time.monotonic()
                try:
                    renewed = await asyncio.wait_for(
                        self.store.renew_lease(lease, self.lease_seconds), timeout=self.renew_interval
                    )
                except (RedisError, OSError, TimeoutError) as exc:
                    if time.monotonic() - last_renewed > 2 * self.renew_interval:
                        log.warning("leader %s cannot renew its lease (%s): stepping down", self.replica_id, exc)
                        return
                    continue
                if not renewed:
                    log.warning("leader %s lost its lease (epoch %d)", self.replica_id, lease.epoch)
                    return
                last_renewed = sent
        except asyncio.CancelledError:
            released = True
            raise
        finally:
            self._lease = None
            self.telemetry.leader_transitions.labels("lost").inc()
            if work is not None:
                await cancel_and_wait(work)
            if released:
                with contextlib.suppress(RedisError, OSError):
                    await asyncio.shield(self.store.release_lease(lease))
