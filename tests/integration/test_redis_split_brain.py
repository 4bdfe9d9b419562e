"""A split brain, with real processes: the Redis primary cut off from its Sentinels and its replica while
both server processes still reach it, the Sentinels promote the replica, and the partition heals.

The old primary keeps taking the servers' writes the whole time, so nothing the servers write there
may decide a bind: a reservation must reach a replica first (``EXTENDER_REDIS_MIN_REPLICAS_ACK``). When
the partition heals, the Sentinels turn the old primary into a replica of the new one and its writes are
thrown away; the servers must find the new primary, rebuild what was lost, and bind again.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from devstack.replica import ServerProcess
from tests.gang_support import gpu_node
from tests.integration.test_gang_http import GANG_ENV, Cluster, gang_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.redis_replication import (
    APP_PASSWORD,
    APP_USER,
    SentinelSet,
    cut_off,
    reconnect,
    wait_replica_of,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

NAMESPACE = "split"
NODE, LATE_NODE = "sb-n1", "sb-n2"
UNACKED = "reached 0 of the 1 Redis replicas asked for"


async def test_a_primary_cut_off_from_its_sentinels_decides_no_bind_and_the_healed_set_binds_on_the_new_primary(
    partitionable_sentinel_set: SentinelSet, fake_kube: FakeKube, server_processes: list[ServerProcess]
) -> None:
    redis = partitionable_sentinel_set
    env = {
        **redis.env(),
        "EXTENDER_REDIS_URL": f"redis://{APP_USER}:{APP_PASSWORD}@/0",
        "EXTENDER_REDIS_PREFIX": f"sb{uuid.uuid4().hex[:8]}",
        "EXTENDER_REDIS_TIMEOUT_SECONDS": "2",
        "EXTENDER_REDIS_MIN_REPLICAS_ACK": "1",
        "EXTENDER_REDIS_ACK_TIMEOUT_SECONDS": "0.5",
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LEASE_SECONDS": "2",
        **GANG_ENV,
    }
    server_processes.extend(ServerProcess(env, f"sb-r{i}") for i in (1, 2))
    for server in server_processes:
        await asyncio.to_thread(server.wait_ready)
    c = Cluster(fake_kube, server_processes)
    try:
        pods = await c.create([gpu_node(NODE, 8)], [gang_pod(f"p-{i}", NAMESPACE, None) for i in range(4)])
        assert await c.bind(0, pods[0], NODE) == ""

        cut_off(redis.primary)
        cut_at = time.monotonic()
        promoted_after = await asyncio.to_thread(redis.wait_promoted, redis.replica)
        # The API changes while the servers write to the side that will lose: the watch leader's record
        # of this node must come back on the new primary.
        fake_kube.client.create(gpu_node(LATE_NODE, 8))
        late_key = f"{env['EXTENDER_REDIS_PREFIX']}:node:{LATE_NODE}"

        async def written_on_the_cut_off_side() -> bool:
            with redis.primary.client() as primary:
                return bool(primary.exists(late_key))

        await eventually(written_on_the_cut_off_side, 10)
        with redis.replica.client() as promoted:
            assert not promoted.exists(late_key), "the servers were expected to write to the old primary"
        errors = [await c.bind(i, pod, NODE) for i, pod in enumerate(pods[1:3])]
        assert all(UNACKED in error for error in errors), errors
        assert fake_kube.requests("bind", "pods") == 1, "a bind decided on the cut-off side"
        assert [c.node_of(pod) for pod in pods] == [NODE, "", "", ""]

        reconnect(redis.primary)
        demoted_after = await asyncio.to_thread(wait_replica_of, redis.primary, redis.replica)

        # kube-scheduler tries each pod again until it binds, on either replica.
        results = {pod["metadata"]["name"]: "not tried" for pod in pods[1:]}
        deadline = time.monotonic() + 60
        while any(results.values()) and time.monotonic() < deadline:
            for i, pod in enumerate(pods[1:]):
                if results[pod["metadata"]["name"]]:
                    results[pod["metadata"]["name"]] = await c.bind(i, pod, NODE)
            await asyncio.sleep(0.5)
        assert not any(results.values()), results
        assert [c.node_of(pod) for pod in pods] == [NODE] * 4
        assert fake_kube.requests("bind", "pods") == 4, "each pod bound once"

        for i in range(len(server_processes)):

            async def agrees(i: int = i) -> bool:
                late = await c.http.get(f"{c.server(i).url}/v1/nodes/{LATE_NODE}")
                return late.status_code == 200 and await c.gpus_requested(i, NODE) == 4

            await eventually(agrees, 30)
        logs = [server.log(tail=None) for server in server_processes]
        assert all("Traceback" not in log for log in logs), logs
        print(
            f"split brain: replica promoted {promoted_after:.1f}s after the cut, old primary a replica "
            f"{demoted_after:.1f}s after the heal; all bound {time.monotonic() - cut_at:.1f}s after the cut"
        )
    finally:
        await c.http.aclose()
