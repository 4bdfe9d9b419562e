"""Bind and gangs in-process over the real runtime: three ClusterRuntimes (one leads and watches
the fake kube-apiserver), one real Redis, Bindings created through the API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.gang.bind import BindService
from extenders.gang.config import GangConfig
from extenders.gang.service import GangService
from extenders.policy import default_policy
from extenders.runtime import ClusterRuntime, RuntimeConfig
from tests.fake_kube.builders import make_pod
from tests.gang_support import GANG_LABEL, GANG_MIN, GPU, gpu_node
from tests.plugins.fake_kube import FakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


class Replica:
    def __init__(self, runtime: ClusterRuntime, gangs: GangService, binds: BindService, client: aredis.Redis) -> None:
        self.runtime = runtime
        self.gangs = gangs
        self.binds = binds
        self.client = client


async def start_replicas(
    fake_kube: FakeKube, redis_url: str, redis_prefix: str, count: int, snapshot_max_age: float = 0.0
) -> list[Replica]:
    """``count`` replicas on one Redis and the fake API; ``snapshot_max_age``: their binds' (BindService)."""
    out: list[Replica] = []
    for i in range(count):
        client = aredis.Redis.from_url(redis_url)
        config = RuntimeConfig(
            prefix=redis_prefix, replica_id=f"r{i}", kube_mode="on", kube_url=fake_kube.url, kube_token=fake_kube.token
        )
        runtime = ClusterRuntime(client, config)
        gangs = GangService(client, runtime, GangConfig(window_seconds=5, poll_interval_seconds=0.1))
        binds = BindService(gangs, default_policy(), snapshot_max_age=snapshot_max_age)
        await runtime.start()
        await gangs.start()
        await binds.start()
        out.append(Replica(runtime, gangs, binds, client))
    return out


async def stop_replicas(replicas: list[Replica]) -> None:
    for r in replicas:
        await r.binds.stop()
        await r.gangs.stop()
        await r.runtime.stop()
        await r.client.aclose()


@pytest.fixture
async def replicas(fake_kube: FakeKube, redis_url: str, redis_prefix: str) -> AsyncIterator[list[Replica]]:
    out = await start_replicas(fake_kube, redis_url, redis_prefix, 3)
    yield out
    await stop_replicas(out)


def gang_pod(name: str, gang: str | None, minimum: int | None = None, gpus: int = 1) -> dict[str, Any]:
    labels = {GANG_LABEL: gang} if gang else {}
    annotations = {GANG_MIN: str(minimum)} if minimum else None
    return make_pod(name, labels=labels, annotations=annotations, extra_requests={GPU: str(gpus)})


async def create(
    fake_kube: FakeKube, replicas: list[Replica], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    for node in nodes:
        fake_kube.client.create(node)
    created = [fake_kube.client.create(p) for p in pods]
    uids = {p["metadata"]["uid"] for p in created}

    async def all_seen() -> bool:
        for r in replicas:
            snap = await r.runtime.snapshot()
            if not uids <= set(snap.pending) or len(snap.nodes) < len(nodes):
                return False
        return True

    await eventually(all_seen)
    return created


def args(pod: dict[str, Any], node: str) -> tuple[str, str, str, str]:
    meta = pod["metadata"]
    return meta["namespace"], meta["name"], meta["uid"], node


def node_of(fake_kube: FakeKube, name: str) -> str:
    return str(fake_kube.client.get("Pod", name)["spec"].get("nodeName") or "")


async def test_gang_binds_through_the_api_only_when_complete(fake_kube: FakeKube, replicas: list[Replica]) -> None:
    pods = await create(
        fake_kube, replicas, [gpu_node("n1", 4), gpu_node("n2", 4)], [gang_pod(f"g-{i}", "g", 8) for i in range(8)]
    )
    held = [
        asyncio.create_task(replicas[i % 3].binds.bind(*args(p, "n1" if i % 2 else "n2")))
        for i, p in enumerate(pods[:7])
    ]

    async def seven() -> bool:
        status = await replicas[0].gangs.gang_status("default", "g")
        return status is not None and len(status["arrived"]) == 7

    await eventually(seven)
    assert all(node_of(fake_kube, f"g-{i}") == "" for i in range(8))
    assert fake_kube.requests("bind", "pods") == 0
    assert await replicas[2].binds.bind(*args(pods[7], "n1")) == ""
    assert await asyncio.wait_for(asyncio.gather(*held), 5) == [""] * 7
    assert sorted(node_of(fake_kube, f"g-{i}") for i in range(8)) == ["n1"] * 4 + ["n2"] * 4

    async def confirmed() -> bool:  # the watch sees the bindings; reservations become bound pods
        snap = await replicas[1].runtime.snapshot()
        placed = [p for n in snap.nodes.values() for p in n.pods.values()]
        return len(placed) == 8 and not any(p.assumed for p in placed) and not snap.pending

    await eventually(confirmed)
    status = await replicas[1].gangs.gang_status("default", "g")
    assert status is not None and (status["state"], status["bound"], status["members"]) == ("permitted", 8, 8)


async def test_plain_binds_race_for_the_last_gpu_through_the_api(fake_kube: FakeKube, replicas: list[Replica]) -> None:
    pods = await create(fake_kube, replicas, [gpu_node("n1", 1)], [gang_pod(f"p-{i}", None) for i in range(3)])
    results = await asyncio.gather(*(replicas[i].binds.bind(*args(p, "n1")) for i, p in enumerate(pods)))
    assert results.count("") == 1
    assert all(r == "" or f"Insufficient {GPU}" in r for r in results)
    assert sum(1 for i in range(3) if node_of(fake_kube, f"p-{i}") == "n1") == 1
    assert fake_kube.requests("bind", "pods") == 1  # the losers never reached the API


async def test_bind_retries_and_api_conflicts(fake_kube: FakeKube, replicas: list[Replica]) -> None:
    a, b, c = await create(
        fake_kube, replicas, [gpu_node("n1"), gpu_node("n2")], [gang_pod(n, None) for n in ("a", "b", "c")]
    )
    assert await replicas[0].binds.bind(*args(a, "n1")) == ""
    assert await replicas[1].binds.bind(*args(a, "n1")) == ""  # 409 for the same node: success
    assert "already bound to node n1" in await replicas[2].binds.bind(*args(a, "n2"))
    # Bound behind our back (another scheduler), not yet in our snapshot: the API's 409 tells.
    fake_kube.client.bind("b", "n2", uid=b["metadata"]["uid"])
    error = await replicas[0].binds.bind(*args(b, "n1"))
    assert "already bound to node n2" in error
    # Deleted after kube-scheduler picked it: pod gone, the reservation is forgotten again.
    fake_kube.client.delete("Pod", "c")
    error = await replicas[1].binds.bind(*args(c, "n1"))
    assert "not found" in error
    snap = await replicas[1].runtime.snapshot()
    assert c["metadata"]["uid"] not in snap.nodes["n1"].pods
    # Recreated under the same name: the old uid is refused.
    fresh = fake_kube.client.create(gang_pod("c", None))
    error = await replicas[2].binds.bind(*args(c, "n1"))
    assert "uid" in error
    assert node_of(fake_kube, "c") == ""
    assert fresh["metadata"]["uid"] != c["metadata"]["uid"]
