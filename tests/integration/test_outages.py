"""Redis and API-server outages: the server says so (readiness, ``Error``), never binds wrongly, and recovers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from app.serving.embedded_redis import EmbeddedRedis
from devstack import http_client
from tests.fake_kube.builders import make_node, make_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess

pytestmark = pytest.mark.integration


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": "5", "labels": {}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4())},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
    }


def _wait(predicate: Any, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis().start()
    yield server
    server.stop()


def test_redis_outage_is_reported_and_nothing_crashes(own_redis: EmbeddedRedis) -> None:
    env = {
        "EXTENDER_REDIS_URL": own_redis.url,
        "EXTENDER_KUBE_MODE": "off",
        "EXTENDER_REDIS_PREFIX": "outage",
        # a sweep every 0.1 s would log 50 lines in the outage below without backoff
        "EXTENDER_GANG_SWEEP_INTERVAL_SECONDS": "0.1",
        "EXTENDER_LOG_FORMAT": "json",
    }
    server = ServerProcess(env, "outage")
    try:
        server.wait_ready()
        with http_client.client(base_url=server.url, timeout=10) as http:
            first = http.post("/filter", json={"Pod": _pod("a"), "Nodes": {"items": [_node("n1")]}})
            assert first.json()["Error"] == ""
            assert [i["metadata"]["name"] for i in first.json()["Nodes"]["items"]] == ["n1"]

            own_redis.stop()
            down_since = time.monotonic()
            # Past EXTENDER_FILTER_SNAPSHOT_MAX_AGE_MS (50 ms) since the last read, every filter reads Redis.
            time.sleep(0.1)
            ready = http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["redis"] is False and ready.json()["error"]
            assert http.get("/healthz").status_code == 200

            filt = http.post("/filter", json={"Pod": _pod("b"), "NodeNames": ["n1"]})
            assert filt.status_code == 200
            assert "unavailable" in filt.json()["Error"]
            assert filt.json()["NodeNames"] == []

            prio = http.post("/prioritize", json={"Pod": _pod("b"), "NodeNames": ["n1"]})
            assert prio.status_code == 200 and prio.json() == [{"Host": "n1", "Score": 0}]

            bind = http.post("/bind", json={"PodName": "b", "PodNamespace": "default", "PodUID": "u", "Node": "n1"})
            assert bind.status_code == 200 and bind.json()["Error"]

            preempt = http.post("/preempt", json={"Pod": _pod("b"), "NodeNameToMetaVictims": {}})
            assert preempt.status_code == 200 and preempt.json() == {"NodeNameToMetaVictims": {}}

            for path in ("/v1/nodes", "/v1/gangs"):
                assert http.get(path).status_code == 503
            assert http.post("/v1/explain", json={"Pod": _pod("b")}).status_code == 503

            time.sleep(max(0.0, 5.0 - (time.monotonic() - down_since)))
            # Redis comes back empty (no persistence): the replica must follow it, not keep stale nodes.
            EmbeddedRedis(port=own_redis.port).start()
            _wait(lambda: http.get("/readyz").status_code == 200, what="readiness after Redis returns")
            after = http.post("/filter", json={"Pod": _pod("c"), "NodeNames": ["n1"]}).json()
            assert after["Error"] == ""
            assert "n1" in after["FailedAndUnresolvableNodes"], "a node Redis no longer has must not pass"
            _wait(lambda: "gang sweep recovered" in server.log(), what="the sweep's recovery line")
        log = server.log()
        assert "Traceback" not in log, log
        lines = [orjson.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]
        assert all(line["replica"] == "outage" and line["level"] and line["logger"] for line in lines)
        sweep = [line["message"] for line in lines if line["message"].startswith("gang sweep")]
        # first failure, then after 1 s, 2 s (3 s in) and 4 s (7 s in, maybe): backing off, not 50 lines
        assert 2 <= len(sweep) <= 5, sweep
        assert "still failing" in sweep[1] and "not logged" in sweep[1], sweep
        assert "recovered after" in sweep[-1], sweep
    finally:
        server.stop()


def test_api_server_refusing_binds_binds_nothing_and_keeps_no_reservation(
    fake_kube: FakeKube, start_server: Any
) -> None:
    fake_kube.client.create(make_node("n1", cpu="4"))
    pod = fake_kube.client.create(make_pod("web", cpu="1"))
    env = {"EXTENDER_KUBE_URL": fake_kube.url, "EXTENDER_KUBE_TOKEN": fake_kube.token, "EXTENDER_LEASE_SECONDS": "3"}
    server: ServerProcess = start_server(env=env, ready=True)
    args = {"PodName": "web", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": "n1"}
    with http_client.client(base_url=server.url, timeout=20) as http:
        _wait(lambda: http.get("/v1/nodes/n1").status_code == 200, what="node n1 in the snapshot")

        fake_kube.client.add_fault(503, match="/binding", count=None, message="etcd is unhappy")
        answer = http.post("/bind", json=args).json()
        assert answer["Error"], "a bind the API refused must be an error"
        assert fake_kube.client.get("pods", "web")["spec"].get("nodeName") in (None, "")
        doc = http.get("/v1/nodes/n1").json()
        assert all(p["uid"] != args["PodUID"] for p in doc["pods"]), "the failed bind left a reservation"

        fake_kube.client.clear_faults()
        assert http.post("/bind", json=args).json() == {"Error": ""}
        assert fake_kube.client.get("pods", "web")["spec"]["nodeName"] == "n1"
        _wait(
            lambda: any(p["uid"] == args["PodUID"] for p in http.get("/v1/nodes/n1").json()["pods"]),
            what="bound pod in the snapshot",
        )


def test_redis_lost_under_a_watching_leader_binds_nothing_then_the_leader_relists(
    own_redis: EmbeddedRedis, fake_kube: FakeKube
) -> None:
    """Redis gone while the replica leads the watch: bind is an error and the API server binds nothing; Redis
    back empty: the leader relists, the snapshot is rebuilt and the same bind goes through."""
    fake_kube.client.create(make_node("n1", cpu="4"))
    pod = fake_kube.client.create(make_pod("web", cpu="1"))
    env = {
        "EXTENDER_REDIS_URL": own_redis.url,
        "EXTENDER_REDIS_PREFIX": "lost",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LEASE_SECONDS": "2",
    }
    server = ServerProcess(env, "lost")
    args = {"PodName": "web", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": "n1"}
    try:
        server.wait_ready()
        with http_client.client(base_url=server.url, timeout=20) as http:
            _wait(lambda: http.get("/v1/nodes/n1").status_code == 200, what="node n1 in the snapshot")

            own_redis.stop()
            assert http.get("/readyz").status_code == 503
            answer = http.post("/bind", json=args)
            assert answer.status_code == 200 and answer.json()["Error"], "a bind without Redis must be an error"
            assert fake_kube.client.get("pods", "web")["spec"].get("nodeName") in (None, "")
            assert fake_kube.requests("bind", "pods") == 0, "nothing may reach the API server's binding"

            # Redis returns with nothing in it: the replica leads again and lists everything anew.
            EmbeddedRedis(port=own_redis.port).start()
            _wait(lambda: http.get("/readyz").status_code == 200, timeout=30, what="readiness after Redis returns")
            _wait(lambda: http.get("/v1/nodes/n1").status_code == 200, timeout=30, what="n1 relisted")
            assert http.get("/readyz").json()["leader"], "the replica should lead the watch again"
            assert http.post("/bind", json=args).json() == {"Error": ""}
            assert fake_kube.client.get("pods", "web")["spec"]["nodeName"] == "n1"
        assert "Traceback" not in server.log(), server.log()
    finally:
        server.stop()
