"""A split brain, with real processes: the Redis primary cut off from its Sentinels and its replica while
both server processes still reach it, the Sentinels promote the replica, and the partition heals.

The old primary stays reachable, so nothing but Sentinel tells a server to leave it: each server asks
Sentinel every second and closes every connection to the old primary, including the ones it holds
outside the pool's checkout (the catch-up reader, the gang subscription). Until it has moved, the old
primary takes its writes. With ``EXTENDER_REDIS_MIN_REPLICAS_ACK`` nothing written on either side may
decide a bind: a reservation must reach a replica first, and neither side has one. Without it (the last
test), binds go on and the promoted side must count from the API server the pods bound on the old side.
When the partition heals, the Sentinels turn the old primary into a replica of the new one and its writes
are thrown away; the servers must have rebuilt on the new primary what was lost, and bind again.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from devstack import http_client
from devstack.replica import ServerProcess
from tests.gang_support import gpu_node
from tests.integration.test_gang_http import GANG_ENV, Cluster, Json, gang_pod
from tests.integration.test_gang_redis_failover import reserved_everywhere
from tests.plugins.fake_kube import FakeKube
from tests.plugins.redis_replication import (
    APP_PASSWORD,
    APP_USER,
    RedisNode,
    SentinelSet,
    cut_off,
    reconnect,
    wait_replica_of,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

NAMESPACE = "split"
NODE, LATE_NODE = "sb-n1", "sb-n2"


@pytest.fixture
async def split(
    partitionable_sentinel_set: SentinelSet,
    fake_kube: FakeKube,
    server_processes: list[ServerProcess],
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[SentinelSet, Cluster, str]]:
    """Two ready replicas on the Sentinel set that bind only on reservations a Redis replica holds (or,
    parametrized with ``"0"``, on any): the set, the cluster and the replicas' key prefix."""
    redis, servers = partitionable_sentinel_set, server_processes
    env = {
        **redis.env(),
        "EXTENDER_REDIS_URL": f"redis://{APP_USER}:{APP_PASSWORD}@/0",
        "EXTENDER_REDIS_PREFIX": f"sb{uuid.uuid4().hex[:8]}",
        "EXTENDER_REDIS_TIMEOUT_SECONDS": "2",
        "EXTENDER_REDIS_MIN_REPLICAS_ACK": getattr(request, "param", "1"),
        "EXTENDER_REDIS_ACK_TIMEOUT_SECONDS": "0.5",
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LEASE_SECONDS": "2",
        **GANG_ENV,
        "EXTENDER_GANG_WINDOW_SECONDS": "10",  # held calls outlast the cut and the promotion
    }
    servers.extend(ServerProcess(env, f"sb-r{i}") for i in (1, 2))
    for server in servers:
        await asyncio.to_thread(server.wait_ready)
    c = Cluster(fake_kube, servers)
    yield redis, c, env["EXTENDER_REDIS_PREFIX"]
    await c.http.aclose()


def sides(c: Cluster, redis: SentinelSet) -> list[str]:
    """For each server, the Redis Sentinel last named to it: ``cut off`` (the old primary) or ``promoted``."""
    names = {redis.primary.address: "cut off", redis.replica.address: "promoted"}
    return [names[http_client.get(f"{server.url}/readyz").json()["redis_primary"]] for server in c.servers]


def server_connections(node: RedisNode) -> list[str]:
    """The names of the server processes' connections open on ``node``."""
    with node.client() as client:
        return [c["name"] for c in client.client_list() if c["name"].startswith("kube-gang-extender:")]


async def both_moved(c: Cluster, redis: SentinelSet) -> None:
    """Both servers leave the old primary, every connection of theirs, within seconds of the promotion."""

    async def moved() -> bool:
        on_old = await asyncio.to_thread(server_connections, redis.primary)
        return await asyncio.to_thread(sides, c, redis) == ["promoted"] * 2 and not on_old

    await eventually(moved, 10)


async def bind_until_bound(c: Cluster, pods: list[Json], node: str, first: int = 0) -> None:
    """kube-scheduler's retries: each pod's bind again, round-robin over the replicas from ``first``,
    until every one succeeds."""
    results = {pod["metadata"]["name"]: "not tried" for pod in pods}
    deadline = time.monotonic() + 60
    while any(results.values()) and time.monotonic() < deadline:
        for i, pod in enumerate(pods):
            if results[pod["metadata"]["name"]]:
                results[pod["metadata"]["name"]] = await c.bind(first + i, pod, node)
        await asyncio.sleep(0.5)
    assert not any(results.values()), results


async def test_a_primary_cut_off_from_its_sentinels_decides_no_bind_and_the_healed_set_binds_on_the_new_primary(
    split: tuple[SentinelSet, Cluster, str], fake_kube: FakeKube
) -> None:
    redis, c, prefix = split
    pods = await c.create([gpu_node(NODE, 8)], [gang_pod(f"p-{i}", NAMESPACE, None) for i in range(4)])
    assert await c.bind(0, pods[0], NODE) == ""

    cut_off(redis.primary)
    cut_at = time.monotonic()
    promoted_after = await asyncio.to_thread(redis.wait_promoted, redis.replica)
    # The API changes while the servers write to the side that will lose: the watch leader's record
    # of this node must come back on the new primary.
    fake_kube.client.create(gpu_node(LATE_NODE, 8))
    late_key = f"{prefix}:node:{LATE_NODE}"
    errors = [await c.bind(i, pod, NODE) for i, pod in enumerate(pods[1:3])]
    # Mostly the acknowledgement's refusal; a server that is just moving to the promoted side may answer
    # that Redis is unreachable instead. Either way an error, and nothing reaches the API.
    assert all(errors), errors
    assert fake_kube.requests("bind", "pods") == 1, "a bind was decided during the partition"
    assert [c.node_of(pod) for pod in pods] == [NODE, "", "", ""]

    await both_moved(c, redis)
    moved_after = time.monotonic() - cut_at
    for server in c.servers:  # what an operator's alert on failovers reads
        metrics = (await c.http.get(f"{server.url}/metrics")).text
        assert "\nextender_redis_primary_changes_total 1.0\n" in metrics, server.name

    # The leader on the promoted side writes the node created meanwhile there, and keeps its lease: a
    # server using both sides at once would lose it there and win it back, term after term, relisting each.
    async def written_on_the_promoted_side() -> bool:
        with redis.replica.client() as promoted:
            return bool(promoted.exists(late_key))

    await eventually(written_on_the_promoted_side, 10)
    with redis.replica.client() as promoted:
        epoch = promoted.get(f"{prefix}:epoch")
        await asyncio.sleep(3 * 2)  # three lease lengths (EXTENDER_LEASE_SECONDS)
        assert promoted.get(f"{prefix}:epoch") == epoch, "the leader lost its lease on the promoted side"

    reconnect(redis.primary)
    demoted_after = await asyncio.to_thread(wait_replica_of, redis.primary, redis.replica)

    await bind_until_bound(c, pods[1:], NODE)
    assert [c.node_of(pod) for pod in pods] == [NODE] * 4
    assert fake_kube.requests("bind", "pods") == 4, "each pod bound once"

    for i in range(len(c.servers)):

        async def agrees(i: int = i) -> bool:
            late = await c.http.get(f"{c.server(i).url}/v1/nodes/{LATE_NODE}")
            return late.status_code == 200 and await c.gpus_requested(i, NODE) == 4

        await eventually(agrees, 30)
    logs = [server.log(tail=None) for server in c.servers]
    assert all("Traceback" not in log for log in logs), logs
    assert all("Sentinel names" in log for log in logs), "each server says it moved"
    print(
        f"split brain: replica promoted {promoted_after:.1f}s after the cut, servers on it {moved_after:.1f}s, "
        f"old primary a replica {demoted_after:.1f}s after the heal; all bound {time.monotonic() - cut_at:.1f}s "
        f"after the cut; binds during the partition answered {errors}"
    )


async def test_a_gang_during_a_split_brain_binds_no_member_and_binds_whole_after_the_heal(
    split: tuple[SentinelSet, Cluster, str], fake_kube: FakeKube
) -> None:
    redis, c, _ = split
    members = [gang_pod(f"g-{i}", NAMESPACE, "train", minimum=3) for i in range(3)]
    pods = await c.create([gpu_node(NODE, 8)], members)
    cut_off(redis.primary)
    await asyncio.to_thread(redis.wait_promoted, redis.replica)

    # Every member's bind, spread over both replicas, each of which may be on either side: a gang
    # assembled on one side cannot bind there, and arrivals split over both sides never assemble.
    binds = [asyncio.create_task(c.bind(i, pod, NODE)) for i, pod in enumerate(pods)]
    answers = await asyncio.wait_for(asyncio.gather(*binds), 40)
    where = await asyncio.to_thread(sides, c, redis)
    assert all(answers), f"a member bound during the partition (servers on {where}): {answers}"
    assert fake_kube.requests("bind", "pods") == 0, "no member may reach the API"
    assert [c.node_of(pod) for pod in pods] == ["", "", ""]
    await both_moved(c, redis)

    reconnect(redis.primary)
    await asyncio.to_thread(wait_replica_of, redis.primary, redis.replica)
    # The retries assemble the gang again on the new primary: held calls until the last one arrives.
    retried = [asyncio.create_task(bind_until_bound(c, [pod], NODE, first=i)) for i, pod in enumerate(pods)]
    await asyncio.wait_for(asyncio.gather(*retried), 90)
    assert [c.node_of(pod) for pod in pods] == [NODE] * 3
    assert fake_kube.requests("bind", "pods") == 3, "each member bound once"
    await reserved_everywhere(c, 3, NODE, timeout=30)
    print(f"gang across a split brain (servers on {where}): answers during the partition {answers}")


@pytest.mark.parametrize("split", ["0"], indirect=True)
async def test_without_replica_acks_binds_go_on_and_the_promoted_side_counts_every_bound_pod(
    split: tuple[SentinelSet, Cluster, str], fake_kube: FakeKube
) -> None:
    """The default (no ``WAIT``): a bind answered on the old primary's side before its server moved has its
    reservation there only, and the old primary's writes are thrown away at the heal. The watch leader
    on the promoted side must count that pod from the API server (its term's relist, or the watch) before
    the heal, so that a later bind there cannot take the same capacity."""
    redis, c, _ = split
    pods = await c.create([gpu_node(NODE, 4)], [gang_pod(f"q-{i}", NAMESPACE, None) for i in range(5)])
    assert await c.bind(0, pods[0], NODE) == ""
    cut_off(redis.primary)
    await asyncio.to_thread(redis.wait_promoted, redis.replica)
    # At once, through a server still on the old primary if there is one (a server caught moving answers
    # an Error, and kube-scheduler tries again).
    where = await asyncio.to_thread(sides, c, redis)
    await bind_until_bound(c, pods[1:2], NODE, first=where.index("cut off") if "cut off" in where else 0)
    await both_moved(c, redis)
    await bind_until_bound(c, pods[2:4], NODE, first=1)
    assert fake_kube.requests("bind", "pods") == 4, "each pod bound once"

    async def counted_on_the_promoted_side(want: int) -> None:
        for i in range(len(c.servers)):

            async def counts(i: int = i) -> bool:
                return await c.gpus_requested(i, NODE) == want

            await eventually(counts, 15)

    await counted_on_the_promoted_side(4)
    # The node is full in both snapshots: the fifth pod is refused, not bound over capacity.
    for i in range(len(c.servers)):
        assert await c.bind(i, pods[4], NODE), "a bind past the node's capacity was answered"
    assert c.node_of(pods[4]) == ""

    reconnect(redis.primary)
    await asyncio.to_thread(wait_replica_of, redis.primary, redis.replica)
    await counted_on_the_promoted_side(4)
    assert fake_kube.requests("bind", "pods") == 4
