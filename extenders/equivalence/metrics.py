"""The cache's counters as Prometheus families, read when scraped (nothing added to the hot path)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from extenders.equivalence.cache import EquivalenceCache


class EquivalenceCollector(Collector):
    def __init__(self, cache: EquivalenceCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        requests = CounterMetricFamily(
            "extender_equivalence_cache_requests",
            "Requests by how much of their node-local work the equivalence cache answered "
            "(hit: every node, partial: some, miss: none).",
            labels=["verb", "result"],
        )
        nodes = CounterMetricFamily(
            "extender_equivalence_cache_nodes",
            "Node verdicts taken from the equivalence cache (reused) or evaluated (computed).",
            labels=["verb", "result"],
        )
        for verb, stats in cache.verbs.items():
            requests.add_metric([verb, "hit"], stats.hits)
            requests.add_metric([verb, "partial"], stats.partial)
            requests.add_metric([verb, "miss"], stats.misses)
            nodes.add_metric([verb, "reused"], stats.nodes_reused)
            nodes.add_metric([verb, "computed"], stats.nodes_computed)
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
