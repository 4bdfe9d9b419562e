"""Prometheus metrics: the HTTP layer's own (requests, latency, errors per verb), the engine's
(``extenders.telemetry``) and the process's, on one registry per app."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from extenders.telemetry import Telemetry

# Counters and histograms otherwise carry a ``_created`` series each, which nothing here reads.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Buckets tuned for a webhook that must answer well inside kube-scheduler's 5 s timeout.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _GCClock:
    """Seconds the cyclic garbage collector ran, by generation, since this module was imported: the
    pauses every request in the process waits through, which no per-request timer shows."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._started


_GC_CLOCK = _GCClock()
gc.callbacks.append(_GC_CLOCK)  # once per process, however many apps it builds


class GCPauseCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "extender_gc_seconds", "Seconds the cyclic garbage collector ran, by generation.", labels=["generation"]
        )
        for generation, seconds in enumerate(_GC_CLOCK.seconds):
            family.add_metric([str(generation)], seconds)
        yield family


class RedisPrimaryCollector(Collector):
    """Failovers as this replica saw them: each a moment its connections moved to another server."""

    def __init__(self, changes: Callable[[], int]) -> None:
        self._changes = changes

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(
            "extender_redis_primary_changes",
            "Times Sentinel named another Redis primary than the one this replica used.",
            value=self._changes(),
        )


class Metrics:
    """One registry per app instance, so tests can build several apps in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "extender_requests_total",
            "Requests served, by verb and HTTP status code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "extender_request_duration_seconds",
            "Server-side request latency, by verb.",
            ["verb"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "extender_errors_total",
            "Requests that failed, by verb and kind (bad_request, domain: the Error field, internal).",
            ["verb", "kind"],
            registry=self.registry,
        )
        self.engine = Telemetry(self.registry)
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(GCPauseCollector())
        PlatformCollector(registry=self.registry)
