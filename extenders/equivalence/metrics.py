"""The cache's counters as Prometheus families, read when scraped (nothing added to the hot path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from extenders.equivalence.cache import EquivalenceCache
from extenders.equivalence.shared import SharedTier


class EquivalenceCollector(Collector):
    def __init__(self, cache: EquivalenceCache, shared: Callable[[], SharedTier | None] = lambda: None) -> None:
        """``shared``: the shared tier, once there is one."""
        self.cache = cache
        self.shared = shared

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        requests = CounterMetricFamily(
            "extender_equivalence_cache_requests",
            "Requests by how much of their node-local work the equivalence cache answered "
            "(recalled: the whole answer, held for the class on the same snapshot; hit: every node, "
            "partial: some, miss: none).",
            labels=["verb", "result"],
        )
        nodes = CounterMetricFamily(
            "extender_equivalence_cache_nodes",
            "Node verdicts taken from the equivalence cache (reused) or evaluated (computed).",
            labels=["verb", "result"],
        )
        for verb, stats in cache.verbs.items():
            requests.add_metric([verb, "recalled"], stats.recalled)
            requests.add_metric([verb, "hit"], stats.hits)
            requests.add_metric([verb, "partial"], stats.partial)
            requests.add_metric([verb, "miss"], stats.misses)
            nodes.add_metric([verb, "reused"], stats.nodes_reused)
            nodes.add_metric([verb, "computed"], stats.nodes_computed)
            nodes.add_metric([verb, "shared"], stats.nodes_shared)
        yield requests
        yield nodes
        yield CounterMetricFamily(
            "extender_equivalence_cache_evictions",
            "Classes dropped for the cap or the TTL.",
            value=cache.evictions,
        )
        yield GaugeMetricFamily("extender_equivalence_cache_classes", "Classes held.", value=cache.classes)
        yield GaugeMetricFamily(
            "extender_equivalence_cache_enabled", "1 when the equivalence cache is on.", value=int(cache.enabled)
        )
        tier = self.shared()
        if tier is None:
            return
        entries = CounterMetricFamily(
            "extender_equivalence_shared_entries",
            "Entries of the shared tier in Redis: fetched for classes new to this replica, written after "
            "computing, dropped (not written: too many waiting, or Redis failed).",
            labels=["result"],
        )
        shared = tier.stats
        for result, value in (("fetched", shared.fetched), ("written", shared.written), ("dropped", shared.dropped)):
            entries.add_metric([result], value)
        yield entries
        yield CounterMetricFamily(
            "extender_equivalence_shared_fetches", "Fetches of a class new to this replica.", value=tier.stats.fetches
        )
        yield CounterMetricFamily(
            "extender_equivalence_shared_errors", "Redis errors of the shared tier.", value=tier.stats.errors
        )
        yield GaugeMetricFamily(
            "extender_equivalence_shared_enabled", "1 when the shared tier is on.", value=int(tier.enabled)
        )
