"""Pods kube-scheduler parked after an attempt that failed on an error, requeued until it ends.

kube-scheduler writes nothing when the same error repeats (a Redis outage failing every attempt),
so no event would ever retry such a pod before its five-minute flush: the watch leader requeues it
on a backoff, within a budget of writes a second (see ``extenders.kube.requeue``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extenders.kube.meta import metadata, object_key
from extenders.kube.requeue import (
    ERROR_RETRY_MAX_SECONDS,
    ERROR_RETRY_PER_SECOND,
    ERROR_RETRY_SECONDS,
    ERRORED,
    PerSecond,
    PodRef,
    scheduling_error,
)

# Requeue these pods, saying why (the watcher's requeue task).
Requeue = Callable[[list[PodRef], str, str], None]


@dataclass(slots=True)
class ParkedOnError:
    """A pod kube-scheduler parked after an attempt that failed on an error, and when to requeue it again."""

    message: str
    ref: PodRef
    due: float
    interval: float


class ErroredPods:
    """The leader's record of pods parked on an error, fed by the pods' list and watch."""

    def __init__(
        self, requeue: Requeue, retry: tuple[float, float] = (ERROR_RETRY_SECONDS, ERROR_RETRY_MAX_SECONDS)
    ) -> None:
        self.requeue = requeue
        self.retry = retry  # (first interval, longest) between requeues of one parked pod
        self._parked: dict[str, ParkedOnError] = {}  # by pod uid
        self._budget = PerSecond(ERROR_RETRY_PER_SECOND)

    def listed(self, pods: Iterable[Mapping[str, Any]], uids: set[str]) -> None:
        """A relist: pods no longer listed are forgotten, the others looked at as updates."""
        for uid in self._parked.keys() - uids:
            del self._parked[uid]
        self.seen(pods)

    def seen(self, pods: Iterable[Mapping[str, Any]], gone: Iterable[Mapping[str, Any]] = ()) -> None:
        """Requeue pods whose last attempt ended on an error, at once for each new error; a repeat of
        the same error makes no new event (kube-scheduler leaves the condition as it is), so those are
        requeued again on a backoff (``run``). Both share a budget of ``ERROR_RETRY_PER_SECOND``: pods
        beyond it (a new leader's list, an outage failing many pods at once) are left to the backoff
        pass, due now, so a burst becomes at most that many writes a second."""
        due: list[PodRef] = []
        first = self.retry[0]
        now = time.monotonic()
        for obj in pods:
            try:
                uid, message = str(metadata(obj).get("uid") or ""), scheduling_error(obj)
                if message is None:
                    self._parked.pop(uid, None)
                    continue
                parked = self._parked.get(uid)
                if parked is None or parked.message != message:
                    ref = (uid, object_key(obj))
                    if self._budget.take():
                        self._parked[uid] = ParkedOnError(message, ref, now + first, first)
                        due.append(ref)
                    else:
                        self._parked[uid] = ParkedOnError(message, ref, now, first)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue  # a malformed pod: its write already logged it
        for obj in gone:
            with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
                self._parked.pop(str(metadata(obj).get("uid") or ""), None)
        if due:
            self.requeue(due, ERRORED, "its scheduling attempt failed on an error")

    async def run(self) -> None:
        """Requeue the pods still parked on the same error when their backoff is due."""
        first, longest = self.retry
        while True:
            await asyncio.sleep(min(first, 1.0))  # a pass a second (more often only in tests)
            now = time.monotonic()
            due: list[PodRef] = []
            for parked in self._parked.values():
                if parked.due <= now:
                    if not self._budget.take():
                        break
                    parked.interval = min(parked.interval * 2, longest)
                    parked.due = now + parked.interval
                    due.append(parked.ref)
            if due:
                self.requeue(due, ERRORED, "its scheduling attempt failed on the same error again")
