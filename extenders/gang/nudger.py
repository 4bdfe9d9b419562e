"""Requeue gang members that filter turned away once their gang may go on.

A member turned away (its siblings do not exist yet, its gang waits for its turn or cools down)
is parked by kube-scheduler as unschedulable, and none of the cluster's own events says when that
reason goes away. The gang scripts record such members and when to requeue them; any replica takes
the due ones (each handed to one replica only) and touches them through ``Requeuer``: what
coscheduling's "activate siblings" does from inside kube-scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import RedisError

from extenders.aio import cancelling
from extenders.gang.state import GangStore
from extenders.kube.requeue import GANG, Requeuer

log = logging.getLogger(__name__)


class Nudger:
    def __init__(self, store: GangStore, requeuer: Requeuer, interval: float) -> None:
        self.store = store
        self.requeuer = requeuer
        self.interval = interval
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        backoff = self.interval
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=backoff)
            self._wake.clear()
            try:
                due = await self.store.take_nudges()
            except (RedisError, OSError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                backoff = min(backoff * 2, 30.0)
                log.warning("taking gang nudges failed (%s); next try in %.0fs", exc, backoff)
                continue
            backoff = self.interval
            for gang, members in due:
                try:
                    await self.requeuer.requeue(members, GANG, f"gang {gang} may go on")
                except Exception:  # a bug must not end the loop: later nudges still matter
                    log.exception("gang %s: requeueing its parked members failed", gang)
