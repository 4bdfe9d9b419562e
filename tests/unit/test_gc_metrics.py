"""The garbage collector's pauses, on /metrics: seconds by generation, moving when it runs."""

from __future__ import annotations

import gc

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import Metrics


def _seconds(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        s.labels["generation"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "extender_gc_seconds"
        for s in family.samples
    }


def test_a_full_collection_adds_to_the_oldest_generations_seconds() -> None:
    metrics = Metrics()
    before = _seconds(metrics)
    assert set(before) == {"0", "1", "2"}
    garbage: list[list[object]] = [[i] for i in range(200_000)]  # something for the collector to walk
    for item in garbage:
        item.append(item)  # a cycle each
    del garbage
    gc.collect()
    after = _seconds(metrics)
    assert after["2"] > before["2"]
    assert all(after[g] >= before[g] for g in before)


def test_two_apps_in_one_process_read_the_same_clock() -> None:
    first, second = Metrics(), Metrics()
    gc.collect()
    assert _seconds(first)["2"] == _seconds(second)["2"] > 0
