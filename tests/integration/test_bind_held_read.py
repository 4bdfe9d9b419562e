"""A plain pod's bind checked on the replica's last read of the snapshot, when that read is recent:
what it spares (the read), what keeps it right (the reservation's compare-and-set on the node) and
what always reads (gang members, pods the last read does not show pending)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.gang_support import gpu_node
from tests.integration.test_bind_runtime import Replica, args, create, gang_pod, node_of, start_replicas, stop_replicas
from tests.plugins.fake_kube import FakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def replicas(fake_kube: FakeKube, redis_url: str, redis_prefix: str) -> AsyncIterator[list[Replica]]:
    """Two replicas whose binds may check on a read up to a minute old (longer than any test step)."""
    out = await start_replicas(fake_kube, redis_url, redis_prefix, 2, snapshot_max_age=60.0)
    yield out
    await stop_replicas(out)


def _leader_first(replicas: list[Replica]) -> list[Replica]:
    """The watch leader first: the other replica reads the snapshot only when a call makes it (the
    leader's own passes read it too), so its last read stays as the test left it."""
    return sorted(replicas, key=lambda r: not r.runtime.is_leader())


def sources(replica: Replica) -> dict[str, float]:
    registry = replica.runtime.telemetry.registry
    return {
        source: registry.get_sample_value("extender_bind_snapshots_total", {"source": source}) or 0.0
        for source in ("held", "read")
    }


async def test_a_held_read_that_missed_a_reservation_never_double_books(
    fake_kube: FakeKube, replicas: list[Replica]
) -> None:
    first, second = await create(fake_kube, replicas, [gpu_node("n1", 1)], [gang_pod(f"p-{i}", None) for i in range(2)])
    other, late = _leader_first(replicas)
    # Both replicas hold a read showing n1's only GPU free.
    stale = late.runtime.cache.current
    assert not stale.nodes["n1"].pods
    assert await other.binds.bind(*args(first, "n1")) == ""
    assert late.runtime.cache.current is stale  # its held read still has n1 free
    before = sources(late)
    error = await late.binds.bind(*args(second, "n1"))
    assert "Insufficient" in error  # the compare-and-set refused the held read; a fresh one decided
    assert sources(late)["held"] == before["held"] + 1
    assert late.runtime.cache.current is not stale
    assert node_of(fake_kube, "p-1") == ""
    assert fake_kube.requests("bind", "pods") == 1


async def test_a_plain_bind_on_a_recent_read_reads_nothing_and_binds(
    fake_kube: FakeKube, replicas: list[Replica]
) -> None:
    (only,) = await create(fake_kube, replicas, [gpu_node("n1", 2)], [gang_pod("plain", None)])
    replica = _leader_first(replicas)[1]
    read = replica.runtime.cache.current
    refreshes = replica.runtime.cache.stats.refreshes
    before = sources(replica)
    assert await replica.binds.bind(*args(only, "n1")) == ""
    assert replica.runtime.cache.stats.refreshes == refreshes  # no catch-up of its own
    assert sources(replica) == {"held": before["held"] + 1, "read": before["read"]}
    assert replica.runtime.cache.current is read
    assert node_of(fake_kube, "plain") == "n1"


async def test_gang_members_and_pods_the_last_read_lacks_read_after_arriving(
    fake_kube: FakeKube, replicas: list[Replica]
) -> None:
    leader, replica = _leader_first(replicas)
    member, *_ = await create(fake_kube, replicas, [gpu_node("n1", 4)], [gang_pod("g-0", "g", 2)])
    before = sources(replica)
    held = asyncio.create_task(replica.binds.bind(*args(member, "n1")))  # held at bind for its sibling

    async def arrived() -> bool:
        status = await replica.gangs.gang_status("default", "g")
        return status is not None and len(status["arrived"]) == 1

    await eventually(arrived)
    assert sources(replica)["read"] == before["read"] + 1  # the gang member read after arriving
    held.cancel()
    await asyncio.gather(held, return_exceptions=True)

    # Created after the replica's last read: found on a read of its own, not fetched from the API.
    late: dict[str, Any] = fake_kube.client.create(gang_pod("late", None))

    async def leader_has_it() -> bool:
        return late["metadata"]["uid"] in (await leader.runtime.snapshot()).pending

    await eventually(leader_has_it)
    assert late["metadata"]["uid"] not in replica.runtime.cache.current.pending
    gets = fake_kube.requests("get", "pods")
    reads = sources(replica)["read"]
    assert await replica.binds.bind(*args(late, "n1")) == ""
    assert sources(replica)["read"] == reads + 1
    assert fake_kube.requests("get", "pods") == gets
    assert node_of(fake_kube, "late") == "n1"


async def test_at_zero_every_bind_reads(fake_kube: FakeKube, redis_url: str, redis_prefix: str) -> None:
    replicas = await start_replicas(fake_kube, redis_url, redis_prefix, 2)
    try:
        (only,) = await create(fake_kube, replicas, [gpu_node("n1", 2)], [gang_pod("zero", None)])
        replica = _leader_first(replicas)[1]
        refreshes = replica.runtime.cache.stats.refreshes
        assert await replica.binds.bind(*args(only, "n1")) == ""
        assert replica.runtime.cache.stats.refreshes == refreshes + 1
        assert sources(replica) == {"held": 0.0, "read": 1.0}
    finally:
        await stop_replicas(replicas)
