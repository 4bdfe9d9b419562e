"""The leader's feed from the Kubernetes API into the Redis snapshot, for one leadership term.

A ``Reflector`` per watched kind (``extenders.sync.kinds``): the required ones at once, each of the
others once it is readable (a 401/403/404 means "run without it", re-checked every
``optional_recheck_seconds``). The store is marked synced once every required kind and every kind
readable at the start has been listed. Every write is fenced by the term's epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import orjson

from extenders.aio import raise_if_cancelling
from extenders.kube.client import GoneError, KubeApiError, KubeClient
from extenders.kube.errored import ErroredPods
from extenders.kube.requeue import (
    ERROR_RETRY_MAX_SECONDS,
    ERROR_RETRY_SECONDS,
    REFUSAL_WINDOW_SECONDS,
    REFUSED_BEFORE_CHANGE,
    REQUEUE_INTERVAL_SECONDS,
    Requeuer,
)
from extenders.sync import kinds
from extenders.sync.kinds import PODS, Watched
from extenders.sync.ops import Op
from extenders.sync.reflector import TRANSIENT, Backoff, Reflector, ReflectorConfig, WatcherStats
from extenders.sync.store import Store
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

# Answers to an optional kind's probe that mean "not for us": no CRD, or RBAC does not allow it.
_UNAVAILABLE = (401, 403, 404)


def watched() -> tuple[Watched, ...]:
    """Every kind the watcher keeps in the store: nodes, pods and the table's kinds, as it is now."""
    return (kinds.NODES, kinds.PODS, *kinds.KINDS)


class Watcher:
    """Runs for one leadership term (``epoch``); every write is fenced by it."""

    def __init__(
        self,
        kube: KubeClient,
        store: Store,
        epoch: int,
        *,
        batch_size: int = 500,
        watch_timeout: int = 300,
        backoff_initial: float = 0.2,
        backoff_max: float = 10.0,
        optional_recheck_seconds: float = 60.0,
        min_watch_seconds: float = 1.0,
        telemetry: Telemetry | None = None,
        error_retry: tuple[float, float] = (ERROR_RETRY_SECONDS, ERROR_RETRY_MAX_SECONDS),
    ) -> None:
        self.kube = kube
        self.telemetry = telemetry or Telemetry()
        self.store = store
        self.epoch = epoch
        self.backoff = Backoff(backoff_initial, backoff_max)
        self.config = ReflectorConfig(batch_size, watch_timeout, self.backoff, min_watch_seconds)
        self.optional_recheck_seconds = optional_recheck_seconds
        self._warned: set[str] = set()  # optional kinds already reported unreadable
        self.stats = WatcherStats()
        self._listed: set[str] = set()
        self._required: set[str] = set()
        self.requeuer = Requeuer(kube, self.telemetry.requeues)
        self.errored = ErroredPods(self.requeuer.start, error_retry)

    async def run(self) -> None:
        """Feed the store until cancelled; raises FencedError when this term is over."""
        every = watched()
        optional = [kind for kind in every if not kind.required]
        readable = await asyncio.gather(*(self._retry(partial(self._readable, kind)) for kind in optional))
        now = [kind for kind in every if kind.required] + [k for k, ok in zip(optional, readable, strict=True) if ok]
        self._required = {kind.resource for kind in now}
        async with asyncio.TaskGroup() as group:
            for kind in now:
                group.create_task(self._reflect(kind), name=f"watch-{kind.resource}")
            for kind, ok in zip(optional, readable, strict=True):
                if not ok:
                    group.create_task(self._await_readable(kind), name=f"watch-{kind.resource}-discovery")
            group.create_task(self.errored.run(), name="requeue-errored")

    async def _reflect(self, kind: Watched) -> None:
        reflector = Reflector(
            kind,
            self.kube,
            self.store,
            self._write,
            self.stats.of(kind.resource),
            self.config,
            self.telemetry,
            self.errored if kind is PODS else None,
        )
        await reflector.run(partial(self._listed_once, kind.resource))

    async def _readable(self, kind: Watched) -> bool:
        """An optional kind's probe: 401/403/404 mean "run without it" (a 401/403 warned once),
        never a reason to wait.

        Only a transient failure (connection, 5xx) is retried, so nodes and pods are always watched
        even when RBAC does not grant the optional kinds.
        """
        try:
            return await self.kube.readable(kind.path)
        except KubeApiError as exc:
            if isinstance(exc, GoneError) or exc.status not in _UNAVAILABLE:
                raise
            if kind.resource not in self._warned:
                self._warned.add(kind.resource)
                log.warning("%s not readable (%s): running without them; will re-check", kind.resource, exc)
            return False

    async def _retry(self, call: Callable[[], Awaitable[Any]]) -> Any:
        failures = 0
        while True:
            try:
                return await call()
            except TRANSIENT as exc:
                raise_if_cancelling()
                failures += 1
                log.warning("kubernetes API call failed (%s); retrying", exc)
                await asyncio.sleep(self.backoff.delay(failures))

    async def _await_readable(self, kind: Watched) -> None:
        """Start watching an optional kind once it becomes readable (CRD installed, RBAC granted)."""
        while True:
            await asyncio.sleep(self.optional_recheck_seconds)
            with contextlib.suppress(*TRANSIENT):
                if await self._readable(kind):
                    log.info("%s readable now: watching them", kind.resource)
                    await self._reflect(kind)
                    return

    async def _listed_once(self, resource: str) -> None:
        if resource in self._listed:
            return
        self._listed.add(resource)
        if not self.stats.synced and self._required <= self._listed:
            marker = orjson.dumps({"epoch": self.epoch, "at": time.time()}).decode()
            await self.store.mark_synced(self.epoch, marker)
            self.stats.synced = True
            log.info("initial list of %s written: store synced", ", ".join(sorted(self._required)))

    async def _write(self, ops: list[Op], read_at: float | None) -> None:
        """Apply a batch; pods filter refused just before it landed are requeued in kube-scheduler
        when the batch freed capacity, changed a node or placed a pod (see extenders.kube.requeue).
        Refusals since its oldest event was read (``read_at``) count too: they were judged without it."""
        held = time.perf_counter() - read_at if read_at is not None else 0.0
        _, refused = await self.store.apply_and_take_refused(
            self.epoch, ops, REFUSAL_WINDOW_SECONDS + held, REQUEUE_INTERVAL_SECONDS
        )
        if refused:
            self.requeuer.start(refused, REFUSED_BEFORE_CHANGE, "refused before the snapshot caught up with a change")
