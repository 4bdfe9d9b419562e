"""Kubernetes Events about pods and PodGroups, written in the background and rate-limited.

``record`` never waits: it updates an in-memory series and a writer task talks to the API
server. As kube-scheduler's recorder does, a repeat of the same reason on the same object
becomes a higher ``count`` on one Event rather than a new one, a busy object gets only a
burst of distinct Events, and the writer's own rate is capped, so a 256-member gang costs
the API server a bounded number of writes however often its members are filtered.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from extenders.aio import cancel_and_wait, wait_event
from extenders.kube.client import PODGROUP_GROUP_VERSION, KubeApiError, KubeClient, rfc3339
from extenders.telemetry import Telemetry

log = logging.getLogger(__name__)

COMPONENT = "kube-gang-extender"
NORMAL = "Normal"
WARNING = "Warning"
_MESSAGE_LIMIT = 1024  # what the events API accepts


@dataclass(slots=True, frozen=True)
class ObjectRef:
    """The object an Event is about (its ``involvedObject``)."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str) -> ObjectRef:
        return cls("Pod", namespace, name, uid)

    @classmethod
    def podgroup(cls, namespace: str, name: str, uid: str) -> ObjectRef:
        return cls("PodGroup", namespace, name, uid, PODGROUP_GROUP_VERSION)


@dataclass(slots=True)
class EventLimits:
    qps: float = 10.0  # writes per second to the API server, all objects together
    burst: int = 50
    per_object_burst: int = 25  # distinct Events one object may get at once ...
    per_object_refill_seconds: float = 300.0  # ... and one more per this long (as client-go's spam filter)
    repeat_flush_seconds: float = 10.0  # a repeat updates its Event at most this often
    forget_seconds: float = 600.0  # a series quiet this long is forgotten; a repeat then starts a new Event
    max_series: int = 10000


@dataclass(slots=True)
class _Series:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    name: str
    first: float
    last: float
    count: int = 1
    written_count: int = 0  # 0: not created yet
    written_at: float = 0.0  # monotonic
    scheduled: bool = False


class _Bucket:
    """A token bucket: ``take`` is True while tokens last; they refill at ``rate`` per second."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, capacity: float, rate: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self.tokens = capacity
        self.stamp = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self) -> bool:
        self._refill()
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def wait_seconds(self) -> float:
        self._refill()
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate


SeriesKey = tuple[str, str, str, str, str]  # kind, namespace, name, type, reason


class EventRecorder:
    """Aggregates and writes Events; without an API server (``kube`` None) it only counts."""

    def __init__(
        self,
        kube: KubeClient | None,
        telemetry: Telemetry | None = None,
        *,
        instance: str = "",
        limits: EventLimits | None = None,
        enabled: bool = True,
    ) -> None:
        self.kube = kube if enabled else None
        self.telemetry = telemetry or Telemetry()
        self.instance = instance
        self.limits = limits or EventLimits()
        self._series: dict[SeriesKey, _Series] = {}
        self._objects: dict[tuple[str, str, str], _Bucket] = {}
        self._due: list[tuple[float, int, SeriesKey]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._rate = _Bucket(self.limits.burst, self.limits.qps)
        self._task: asyncio.Task[None] | None = None

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Note an Event; returns at once (the writer task sends it)."""
        if self.kube is None or not ref.name:
            return
        key: SeriesKey = (ref.kind, ref.namespace, ref.name, type_, reason)
        now = time.time()
        series = self._series.get(key)
        if series is not None and series.ref.uid != ref.uid:
            series = None  # the name now belongs to another object
        if series is None:
            if not self._object_bucket(ref).take():
                self.telemetry.kube_events.labels("dropped").inc()
                return
            if len(self._series) >= self.limits.max_series:
                self._forget(now, force=True)
            series = _Series(ref, type_, reason, message[:_MESSAGE_LIMIT], f"{ref.name}.{time.time_ns():x}", now, now)
            self._series[key] = series
            self._schedule(key, series, time.monotonic())
            return
        series.count += 1
        series.last = now
        series.message = message[:_MESSAGE_LIMIT]
        if not series.scheduled:
            self._schedule(key, series, series.written_at + self.limits.repeat_flush_seconds)

    def _object_bucket(self, ref: ObjectRef) -> _Bucket:
        okey = (ref.kind, ref.namespace, ref.name)
        bucket = self._objects.get(okey)
        if bucket is None:
            limits = self.limits
            bucket = self._objects[okey] = _Bucket(limits.per_object_burst, 1 / limits.per_object_refill_seconds)
        return bucket

    def _schedule(self, key: SeriesKey, series: _Series, due: float) -> None:
        series.scheduled = True
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, key))
        self._wake.set()

    def _forget(self, now: float, force: bool = False) -> None:
        """Drop quiet series (and their objects' buckets); ``force`` also drops the oldest tenth."""
        quiet = [k for k, s in self._series.items() if not s.scheduled and now - s.last > self.limits.forget_seconds]
        if force and len(quiet) < self.limits.max_series // 10:
            idle = sorted((s.last, k) for k, s in self._series.items() if not s.scheduled)
            quiet.extend(k for _, k in idle[: self.limits.max_series // 10])
        for key in quiet:
            self._series.pop(key, None)
        live = {(k[0], k[1], k[2]) for k in self._series}
        for okey in [o for o in self._objects if o not in live]:
            del self._objects[okey]

    # --- the writer ------------------------------------------------------------------------------

    def start(self) -> None:
        if self.kube is not None and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self.run(), name="event-writer")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def run(self) -> None:
        last_forget = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last_forget > 60:
                self._forget(time.time())
                last_forget = now
            if not self._due:
                await wait_event(self._wake, 60)
                continue
            due, _, key = self._due[0]
            wait = max(due - now, self._rate.wait_seconds())
            if wait > 0:
                await wait_event(self._wake, wait)
                continue
            heapq.heappop(self._due)
            self._rate.take()
            series = self._series.get(key)
            if series is None:
                continue
            series.scheduled = False
            await self._write(series)

    async def _write(self, series: _Series) -> None:
        assert self.kube is not None
        count = series.count
        try:
            if series.written_count and await self.kube.patch_event(
                series.ref.namespace,
                series.name,
                {"count": count, "lastTimestamp": rfc3339(series.last), "message": series.message},
            ):
                self.telemetry.kube_events.labels("updated").inc()
            else:
                if series.written_count:  # expired on the server: start a new Event
                    series.name = f"{series.ref.name}.{time.time_ns():x}"
                await self.kube.create_event(series.ref.namespace, self._body(series, count))
                self.telemetry.kube_events.labels("created").inc()
        except (httpx.HTTPError, KubeApiError, OSError) as exc:
            self.telemetry.kube_events.labels("failed").inc()
            ref = series.ref
            log.debug("event %s on %s %s/%s not written: %s", series.reason, ref.kind, ref.namespace, ref.name, exc)
            return
        series.written_count = count
        series.written_at = time.monotonic()

    def _body(self, series: _Series, count: int) -> dict[str, Any]:
        ref = series.ref
        involved: dict[str, Any] = {
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "apiVersion": ref.api_version,
        }
        if ref.uid:
            involved["uid"] = ref.uid
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": ref.namespace},
            "involvedObject": involved,
            "type": series.type,
            "reason": series.reason,
            "message": series.message,
            "count": count,
            "firstTimestamp": rfc3339(series.first),
            "lastTimestamp": rfc3339(series.last),
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance[:128],
        }
