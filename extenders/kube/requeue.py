"""Move pods kube-scheduler parked as unschedulable back to its active queue.

kube-scheduler retries a parked pod only on cluster events it considers relevant (or after five
minutes). An update of an unscheduled pod's metadata is one: it moves the pod to the active (or
backoff) queue. The extender makes that event, by touching an annotation, when it knows a parked
pod's reason went away and nothing else would say so: a gang member's siblings arrived, the pod
was refused on a snapshot that had not yet caught up with an event kube-scheduler already acted on,
or its attempt failed on an error (an extender call cut off by a replica's death), which
kube-scheduler 1.28 parks like a refusal although nothing in the cluster has to change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
from prometheus_client import Counter

from extenders.kube.client import KubeApiError, KubeClient

log = logging.getLogger(__name__)

REQUEUE_ANNOTATION = "kube-gang-extender/requeued-at"
# A refusal this recent may have been judged on a snapshot behind kube-scheduler's own view: the
# leader's watcher applies an event a little after kube-scheduler has acted on it.
REFUSAL_WINDOW_SECONDS = 2.0
# Refusals are kept this long, for the write of a watcher that held an event longer than the window
# (it hands back every refusal since it read the event).
REFUSAL_KEEP_SECONDS = 60.0
# A refusal judged on a snapshot behind a change already written requeues its pod at once, unless the
# pod was requeued within this interval and after that change; then it waits for the watcher's next
# change, which requeues it like any refusal.
REQUEUE_INTERVAL_SECONDS = 10.0

# PodScheduled's reason when kube-scheduler's attempt failed on an error rather than a refusal.
SCHEDULER_ERROR = "SchedulerError"
# A pod still parked on the same error (kube-scheduler writes nothing when an error repeats, e.g.
# through a Redis outage) is requeued again after this long, then twice as long each time, up to
# the maximum: short of kube-scheduler's own five-minute flush, and sparing the API server.
ERROR_RETRY_SECONDS = 15.0
ERROR_RETRY_MAX_SECONDS = 240.0
# At most this many such requeues a second: many pods failing for good (a broken scheduler profile)
# must not become a stream of writes; they then fall back to kube-scheduler's own flush.
ERROR_RETRY_PER_SECOND = 20

# A pod to requeue: (uid, namespace/name); the uid guards against a pod recreated under the name.
PodRef = tuple[str, str]

# Why a pod is requeued: the ``reason`` label of extender_requeues_total.
STALE_REFUSAL = "stale_refusal"
REFUSED_BEFORE_CHANGE = "refused_before_change"
ERRORED = "errored"
GANG = "gang"


class PerSecond:
    """At most ``limit`` grants in each one-second window (``clock``: monotonic seconds)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._window = float("-inf")
        self._left = 0

    def take(self) -> bool:
        now = self.clock()
        if now - self._window >= 1.0:
            self._window, self._left = now, self.limit
        if self._left <= 0:
            return False
        self._left -= 1
        return True


def scheduling_error(pod: Mapping[str, Any]) -> str | None:
    """The message of an unbound pod's failed attempt when it ended on an error, else None.

    Reads the raw object: the snapshot keeps no pod conditions, and only the watch leader asks.
    """
    spec, status = pod.get("spec"), pod.get("status")
    if not isinstance(spec, dict) or spec.get("nodeName") or not isinstance(status, dict):
        return None
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            if condition.get("status") == "False" and condition.get("reason") == SCHEDULER_ERROR:
                return str(condition.get("message") or "")
            return None
    return None


class Requeuer:
    def __init__(self, kube: KubeClient, counter: Counter | None = None, concurrency: int = 8) -> None:
        """``counter``: extender_requeues_total, counted by reason."""
        self.kube = kube
        self.counter = counter
        self._slots = asyncio.Semaphore(concurrency)
        self._running: set[asyncio.Task[int]] = set()  # held so the loop does not drop them
        self.requeued = 0  # pods touched by this process

    def start(self, pods: Sequence[PodRef], reason: str, why: str) -> None:
        """``requeue`` in the background: the caller's answer or write does not wait for the patches."""
        task = asyncio.create_task(self.requeue(pods, reason, why), name="requeue")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def requeue(self, pods: Sequence[PodRef], reason: str, why: str) -> int:
        """Touch every pod; returns how many were touched (gone or replaced pods are skipped).
        ``reason``: one of the module's reasons; ``why``: the log's words."""
        stamp = f"{time.time():.3f}"

        async def one(uid: str, ref: str) -> bool:
            namespace, _, name = ref.partition("/")
            async with self._slots:
                try:
                    return await self.kube.annotate_pod(namespace, name, uid, {REQUEUE_ANNOTATION: stamp})
                except (KubeApiError, httpx.HTTPError) as exc:
                    # Lost: kube-scheduler's own periodic retry (five minutes at most) still comes.
                    log.warning("could not requeue %s (%s): %s", ref, why, exc)
                    return False

        done = sum(await asyncio.gather(*(one(uid, ref) for uid, ref in pods)))
        self.requeued += done
        if self.counter is not None and done:
            self.counter.labels(reason).inc(done)
        log.info("requeued %d pod(s) in kube-scheduler: %s", done, why)
        return done
