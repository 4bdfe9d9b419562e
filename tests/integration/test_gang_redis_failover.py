"""A Redis failover while gang members are held at bind, with real processes: a Sentinel set (a primary,
its replica, three Sentinels), two server processes finding the primary through the Sentinels, and the
fake kube-apiserver.

Replication is asynchronous, so the arrivals of held members may exist on the old primary only. The
promoted replica then knows nothing of them: the held calls must answer an error and bind nothing,
and the gang must be able to assemble again on the new primary.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

import pytest

from devstack.replica import ServerProcess
from tests.fake_kube.builders import make_pod
from tests.gang_support import GANG_LABEL, GANG_MIN, GPU, gpu_node
from tests.integration.test_gang_http import GANG_ENV, Cluster
from tests.plugins.fake_kube import FakeKube
from tests.plugins.redis_replication import SentinelSet, wait_replicated
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

NAMESPACE = "failover"
NODE = "fo-n1"


async def start(
    sentinel_set: SentinelSet, fake_kube: FakeKube, servers: list[ServerProcess], lease: str
) -> tuple[Cluster, list[dict[str, Any]]]:
    """Two replicas on the Sentinel set and a gang of three GPU pods (minimum 3) on one node, the
    whole of it on the replica Redis too."""
    env = {
        **sentinel_set.env(),
        "EXTENDER_REDIS_PREFIX": f"gfo{uuid.uuid4().hex[:8]}",
        "EXTENDER_REDIS_TIMEOUT_SECONDS": "1",
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LEASE_SECONDS": "2",
        **GANG_ENV,
        # Long enough that the held calls see the failover before their window could close.
        "EXTENDER_GANG_WINDOW_SECONDS": "10",
        "EXTENDER_GANG_ARRIVAL_LEASE_SECONDS": lease,
    }
    servers.extend(ServerProcess(env, f"fo-r{i}") for i in (1, 2))
    for server in servers:
        await asyncio.to_thread(server.wait_ready)
    c = Cluster(fake_kube, servers)
    members = [
        make_pod(
            f"w-{i}",
            namespace=NAMESPACE,
            labels={GANG_LABEL: "train"},
            annotations={GANG_MIN: "3"},
            extra_requests={GPU: "1"},
        )
        for i in range(3)
    ]
    pods = await c.create([gpu_node(NODE, 8)], members)
    await asyncio.to_thread(wait_replicated, sentinel_set.primary, sentinel_set.replica)
    return c, pods


async def hold_two(c: Cluster, pods: list[dict[str, Any]]) -> list[asyncio.Task[str]]:
    """Bind calls for two of the three members, held (one on each replica) until the gang can bind."""
    held = [asyncio.create_task(c.bind(i, p, NODE)) for i, p in enumerate(pods[:2])]

    async def two_held() -> bool:
        doc = await c.gang(0, NAMESPACE, "train")
        return doc is not None and len(doc["arrived"]) == 2

    await eventually(two_held, 10)
    assert await c.gpus_requested(0, NODE) == 2 and not any(t.done() for t in held)
    return held


async def reserved_everywhere(c: Cluster, gpus: int, node: str = NODE, timeout: float = 15) -> None:
    for i in range(len(c.servers)):

        async def reserved(i: int = i) -> bool:
            return await c.gpus_requested(i, node) == gpus

        await eventually(reserved, timeout)


# What a held call meets depends on its arrival lease against the outage (about 2 s here): a short lease
# lapses while Redis is unreachable; a long one outlives the outage, and the call then finds that the
# promoted replica never heard of its arrival.
UNREACHABLE = "Redis unreachable for longer than the arrival lease"
GONE = "is gone"


@pytest.mark.parametrize("lease", ["1", "6"])
async def test_held_members_whose_arrivals_a_failover_lost_bind_nothing_and_the_gang_assembles_again(
    sentinel_set: SentinelSet, fake_kube: FakeKube, server_processes: list[ServerProcess], lease: str
) -> None:
    c, pods = await start(sentinel_set, fake_kube, server_processes, lease)
    try:
        # The replica hears nothing more (stopped, and its link cut: bytes already sent would still
        # reach it from the socket buffer): what the held calls write lives on the old primary only.
        sentinel_set.replica.signal(signal.SIGSTOP)
        with sentinel_set.primary.client() as primary:
            assert primary.client_kill_filter(_type="replica") == 1
        held = await hold_two(c, pods)

        sentinel_set.primary.kill()
        killed_at = time.monotonic()
        sentinel_set.replica.signal(signal.SIGCONT)
        await asyncio.to_thread(sentinel_set.wait_promoted, sentinel_set.replica)

        errors = await asyncio.wait_for(asyncio.gather(*held), 30)
        answered_after = time.monotonic() - killed_at
        assert all(errors), f"a held call whose arrival was lost answered success: {errors}"
        for error in errors:
            assert "gang failover/train" in error and (UNREACHABLE in error or GONE in error), error
        if lease == "6" and answered_after < 5:  # the outage ended well within the lease
            assert all(GONE in error for error in errors), errors
        assert fake_kube.requests("bind", "pods") == 0, "nothing may bind"
        assert all(c.node_of(p) == "" for p in pods)
        for server in server_processes:  # readiness comes back with no help
            await asyncio.to_thread(server.wait_ready, 30)
        await reserved_everywhere(c, 0)

        # kube-scheduler tries the members again (after a cool-down, any replica): the gang assembles
        # on the new primary and binds whole.
        attempts: list[list[str]] = []
        deadline = time.monotonic() + 40
        while True:
            results = await asyncio.gather(*(c.bind(i + 1, p, NODE) for i, p in enumerate(pods)))
            attempts.append(results)
            if results == ["", "", ""] or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
        assert results == ["", "", ""], attempts
        assert [c.node_of(p) for p in pods] == [NODE] * 3
        assert fake_kube.requests("bind", "pods") == 3
        await reserved_everywhere(c, 3)
        logs = [server.log(tail=None) for server in server_processes]
        assert all("Traceback" not in log for log in logs), logs
        print(
            f"gang across a Redis failover, lease {lease} s: held calls answered {answered_after:.1f}s after the "
            f"primary was killed ({errors[0]!r}); bound whole after {len(attempts)} attempt(s)"
        )
    finally:
        await c.http.aclose()


async def test_held_members_whose_arrivals_reached_the_promoted_replica_bind_with_the_last_member(
    sentinel_set: SentinelSet, fake_kube: FakeKube, server_processes: list[ServerProcess]
) -> None:
    c, pods = await start(sentinel_set, fake_kube, server_processes, "6")
    try:
        held = await hold_two(c, pods)
        await asyncio.to_thread(wait_replicated, sentinel_set.primary, sentinel_set.replica)
        sentinel_set.primary.kill()
        killed_at = time.monotonic()
        await asyncio.to_thread(sentinel_set.wait_promoted, sentinel_set.replica)
        for server in server_processes:
            await asyncio.to_thread(server.wait_ready, 30)
        assert not any(t.done() for t in held), [t.result() for t in held if t.done()]
        last = await c.bind(2, pods[2], NODE)
        results = await asyncio.wait_for(asyncio.gather(*held), 30)
        assert [*results, last] == ["", "", ""]
        assert [c.node_of(p) for p in pods] == [NODE] * 3
        assert fake_kube.requests("bind", "pods") == 3
        await reserved_everywhere(c, 3)
        took = time.monotonic() - killed_at
        print(f"gang across a Redis failover that lost nothing: bound whole {took:.1f}s after the kill")
    finally:
        await c.http.aclose()
