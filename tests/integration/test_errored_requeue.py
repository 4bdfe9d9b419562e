"""The watch leader requeues pods kube-scheduler parked after an attempt that failed on an error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extenders.kube.requeue import ERROR_RETRY_PER_SECOND, REQUEUE_ANNOTATION
from tests.fake_kube.builders import make_pod
from tests.integration.watch_feed import Feed
from tests.plugins.fake_kube import FakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


def attempt_failed(reason: str, message: str) -> dict[str, Any]:
    """The PodScheduled condition kube-scheduler writes after a failed attempt, as a status patch."""
    condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    return {"status": {"conditions": [condition]}}


async def test_pods_whose_attempt_failed_on_an_error_are_requeued_once_per_error(
    fake_kube: FakeKube, feed: Feed
) -> None:
    """kube-scheduler 1.28 parks a pod whose attempt failed on an error (an extender call cut off by a
    dying replica) until some unrelated event: the leader requeues it, whether it finds it in its list
    or through the watch, once per distinct error; refused pods are left to kube-scheduler."""
    client = fake_kube.client
    for name in ("listed", "refused", "watched"):
        client.create(make_pod(name))
    client.patch("Pod", "listed", attempt_failed("SchedulerError", 'Post "http://r1/filter": EOF'), status=True)
    client.patch("Pod", "refused", attempt_failed("Unschedulable", "0/3 nodes are available"), status=True)

    def stamp(name: str) -> str | None:
        annotations: dict[str, str] = client.get("Pod", name)["metadata"].get("annotations") or {}
        return annotations.get(REQUEUE_ANNOTATION)

    async def requeued(count: int) -> bool:
        return watcher.requeuer.requeued >= count

    watcher = await feed.start()
    await eventually(lambda: requeued(1))
    assert stamp("listed") is not None and stamp("refused") is None and stamp("watched") is None
    await fake_kube.watching("pods")

    client.patch("Pod", "watched", attempt_failed("SchedulerError", "context deadline exceeded"), status=True)
    await eventually(lambda: requeued(2))
    first = stamp("watched")
    assert first is not None
    # Events that repeat the error (our own annotation's, a label change) requeue nothing more; a new
    # error does, once.
    client.patch("Pod", "watched", {"metadata": {"labels": {"touched": "yes"}}})
    client.patch("Pod", "watched", attempt_failed("SchedulerError", 'Post "http://r2/filter": EOF'), status=True)
    await eventually(lambda: requeued(3))
    await asyncio.sleep(0.3)  # room for a wrong fourth requeue to show
    assert watcher.requeuer.requeued == 3 and stamp("watched") != first
    assert watcher.telemetry.registry.get_sample_value("extender_requeues_total", {"reason": "errored"}) == 3
    assert stamp("refused") is None


async def test_a_pod_parked_on_the_same_error_is_requeued_again_on_a_backoff(fake_kube: FakeKube, feed: Feed) -> None:
    """kube-scheduler writes nothing when an attempt fails again with the same error (a long Redis
    outage), so no event says the pod is still parked: it is requeued again, each time later, until its
    condition changes."""
    client = fake_kube.client
    client.create(make_pod("stuck"))
    client.patch("Pod", "stuck", attempt_failed("SchedulerError", "shared state unavailable"), status=True)
    watcher = await feed.start(error_retry=(0.2, 0.4))

    async def requeued(count: int) -> bool:
        return watcher.requeuer.requeued >= count

    started = asyncio.get_running_loop().time()
    await eventually(lambda: requeued(1))
    await eventually(lambda: requeued(4), timeout=5)  # again after 0.2 s, then every 0.4 s
    took = asyncio.get_running_loop().time() - started
    assert took >= 0.2 + 0.4 + 0.4 - 0.1, f"four requeues within {took:.2f}s: no backoff"
    client.patch("Pod", "stuck", attempt_failed("Unschedulable", "0/3 nodes are available"), status=True)
    await eventually(lambda: feed.store.synced())  # the watch is live
    await asyncio.sleep(0.3)  # the refusal's event has been applied by now
    settled = watcher.requeuer.requeued
    await asyncio.sleep(1.0)
    assert watcher.requeuer.requeued == settled, "a refused pod is kube-scheduler's to retry"


async def test_a_burst_of_pods_parked_on_errors_is_requeued_at_the_rate_cap(fake_kube: FakeKube, feed: Feed) -> None:
    """A new leader finding many pods parked on errors (an outage failed them all) requeues them at
    most ERROR_RETRY_PER_SECOND a second, not in one burst of writes to the API server."""
    client = fake_kube.client
    count = ERROR_RETRY_PER_SECOND + 10
    for i in range(count):
        client.create(make_pod(f"failed-{i}"))
        client.patch("Pod", f"failed-{i}", attempt_failed("SchedulerError", "Redis unavailable"), status=True)
    watcher = await feed.start(error_retry=(5.0, 10.0))

    async def requeued(n: int) -> bool:
        return watcher.requeuer.requeued >= n

    loop = asyncio.get_running_loop()
    await eventually(lambda: requeued(ERROR_RETRY_PER_SECOND))
    first_batch = loop.time()
    await asyncio.sleep(0.3)
    assert watcher.requeuer.requeued == ERROR_RETRY_PER_SECOND, "more than the cap at once"
    await eventually(lambda: requeued(count), timeout=5)
    assert loop.time() - first_batch >= 0.6, "the rest came within the same second"
    await asyncio.sleep(0.5)
    assert watcher.requeuer.requeued == count  # each once: their next turn is seconds away
