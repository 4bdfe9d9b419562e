"""Two real replicas, one Redis: a class one replica computed is answered by the other from the
shared tier on its first call, with the same answers, and the counters say so."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.model import NodeFacts
from extenders.sync.store import Op, Store
from tests.plugins.servers import ServerProcess, StartServer

pytestmark = pytest.mark.integration

NODES = 40
GI = 2**30


def _pod(name: str) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "web"}},
        "spec": {"containers": [container], "nodeSelector": {"disk": "ssd"}},
    }


def _stats(replica: ServerProcess) -> dict[str, Any]:
    response = replica.get("/v1/cache/stats")
    assert response.status_code == 200, response.text
    doc: dict[str, Any] = response.json()
    return doc


def _wait(replica: ServerProcess, what: str, ok: Any, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        doc = _stats(replica)
        if ok(doc):
            return doc
        assert time.monotonic() < deadline, f"{replica.name}: {what}: {doc}"
        time.sleep(0.05)


async def test_a_replica_answers_a_class_another_computed_from_the_shared_tier(
    start_server: StartServer, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    env = {"EXTENDER_KUBE_MODE": "off", "EXTENDER_EQUIVALENCE_CACHE_SHARED": "true"}
    first, second = start_server(env=env, name="first", ready=True), start_server(env=env, name="second", ready=True)
    store = Store(redis_async, redis_prefix)
    attempt = await store.acquire_lease("shared-test#1", ttl=600)  # no replica watches: the test writes
    assert attempt.lease is not None
    try:
        facts = [
            NodeFacts(
                name=f"n{i:02d}",
                labels={"kubernetes.io/hostname": f"n{i:02d}", "disk": "ssd" if i % 3 else "hdd"},
                conditions={"Ready": "True"},
                allocatable={"cpu": 2000 if i % 4 else 1000, "memory": 8 * GI, "pods": 110},
            )
            for i in range(NODES)
        ]
        generation = await store.apply(attempt.lease.epoch, [Op.node(f) for f in facts])
    finally:
        await store.release_lease(attempt.lease)
    names = [f.name for f in facts]
    with first.client() as one, second.client() as two:
        for replica, client in ((first, one), (second, two)):
            deadline = time.monotonic() + 10
            while client.get("/v1/nodes").json()["generation"] < generation:
                assert time.monotonic() < deadline, f"{replica.name} never caught up"
                time.sleep(0.02)
        answers = []
        for i in range(2):  # admitted on the second sighting, then stored and written
            body = {"Pod": _pod(f"a{i}"), "NodeNames": names}
            answers.append(one.post("/filter", json=body).json())
            scores = one.post("/prioritize", json={"Pod": _pod(f"a{i}"), "NodeNames": answers[-1]["NodeNames"]})
        _wait(first, "entries written", lambda d: d["shared"]["written"] > NODES)
        _wait(second, "class listed", lambda d: d["shared"]["known_classes"] >= 1)

        body = {"Pod": _pod("b0"), "NodeNames": names}
        answer = two.post("/filter", json=body).json()
        passing = answer["NodeNames"]
        their_scores = two.post("/prioritize", json={"Pod": _pod("b0"), "NodeNames": passing}).json()
    assert answer == answers[-1]
    assert their_scores == scores.json()
    assert 0 < len(passing) < NODES  # the selector and the CPU both refused some nodes
    doc = _stats(second)
    assert doc["verbs"]["filter"]["nodes_shared"] == NODES
    assert doc["verbs"]["filter"]["nodes_computed"] == 0
    assert doc["verbs"]["prioritize"]["nodes_shared"] > 0
    assert doc["verbs"]["prioritize"]["nodes_computed"] == 0
    assert doc["shared"]["fetches"] == 2 and doc["shared"]["enabled"] is True
    metrics = second.get("/metrics").text
    assert f'extender_equivalence_cache_nodes_total{{result="shared",verb="filter"}} {NODES}.0' in metrics


async def test_the_shared_tier_is_off_by_default(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off"}, ready=True)
    assert _stats(server)["shared"]["enabled"] is False
    assert "extender_equivalence_shared_enabled 0.0" in server.get("/metrics").text
