"""Redis beyond one instance, with real processes: replicas that find the primary through Sentinel and
follow a failover by themselves, the Sentinels' own password, and a Redis Cluster node refused.

The Sentinel set is a real primary, a real replica (``--replicaof``) and three real Sentinels
(quorum 2, a primary silent for 0.5 s is down); the extender replicas are real ``python -m app``
processes in standalone mode, serving filter from the snapshot the first call stored.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aredis
import trustme

from app.serving.embedded_redis import free_port
from devstack import http_client
from devstack.replica import REPO
from extenders.sync.redis_connect import PoolOptions, RedisPool, RedisTarget, UnsupportedRedisError, cluster_refusal
from tests.fake_kube.builders import make_node, make_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.redis_replication import RedisNode, SentinelSet, StartNode, TlsFiles, wait_replicated
from tests.plugins.servers import ServerProcess
from tests.waiting import readiness_with_reason

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BIG = ["big-1", "big-2"]
TINY = "tiny"  # 100m of CPU: the pod's 500m never fits


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "5", "labels": {}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
    }


def judge(answer: httpx.Response) -> str:
    """``ok`` for the right verdict, ``error`` for a clean refusal; anything else fails the test."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    if body["Error"]:
        assert not body.get("NodeNames"), f"an Error answer passed nodes: {body}"
        return "error"
    assert body["NodeNames"] == BIG, body
    failed = {**(body.get("FailedNodes") or {}), **(body.get("FailedAndUnresolvableNodes") or {})}
    assert "Insufficient cpu" in failed.get(TINY, ""), body  # known, and too small: not an unknown name
    return "ok"


def sentinel_env(sentinel: RedisNode, url: str, prefix: str) -> dict[str, str]:
    """A standalone replica finding master ``m`` through one Sentinel, ``url`` carrying the rest."""
    return {
        "EXTENDER_KUBE_MODE": "off",
        "EXTENDER_REDIS_PREFIX": f"{prefix}{uuid.uuid4().hex[:8]}",
        "EXTENDER_REDIS_SENTINELS": sentinel.address,
        "EXTENDER_REDIS_SENTINEL_MASTER": "m",
        "EXTENDER_REDIS_URL": url,
    }


@pytest.fixture
def replicas(server_processes: list[ServerProcess]) -> list[ServerProcess]:
    return server_processes


@dataclass
class Answer:
    at: float
    replica: str
    kind: str  # "ok", "error", or "wrong: ..." (kept, so the assertion shows all of them)


def filter_loop(servers: list[ServerProcess], stop: threading.Event, answers: list[Answer]) -> None:
    """kube-scheduler's side: filter by node names on every replica, again and again."""
    body = {"Pod": pod("loop"), "NodeNames": [*BIG, TINY]}
    with http_client.client(timeout=15) as http:
        while not stop.is_set():
            for server in servers:
                try:
                    kind = judge(http.post(f"{server.url}/filter", json=body))
                except (AssertionError, httpx.HTTPError) as exc:
                    kind = f"wrong: {exc!r}"
                answers.append(Answer(time.monotonic(), server.name, kind))
            time.sleep(0.05)


def test_a_killed_primary_fails_over_and_the_replicas_follow_by_themselves(
    sentinel_set: SentinelSet, replicas: list[ServerProcess]
) -> None:
    started = time.monotonic()
    prefix = f"sent{uuid.uuid4().hex[:8]}"
    env = {**sentinel_set.env(), "EXTENDER_KUBE_MODE": "off", "EXTENDER_REDIS_PREFIX": prefix}
    env["EXTENDER_REDIS_TIMEOUT_SECONDS"] = "1"
    replicas.extend(ServerProcess(env, f"sentinel-r{i}") for i in (1, 2))
    for server in replicas:
        server.wait_ready()
        ready = server.get("/readyz").json()
        assert ready["redis_sentinels"] == sentinel_set.sentinel_list, ready
        assert ready["redis_sentinel_master"] == sentinel_set.master and ready["redis_url"] is None, ready
        assert ready["redis_primary"] == sentinel_set.primary.address, ready

    # The first call carries the node objects (standalone mode stores them); the other replica then
    # answers by name from what it reads back through Redis.
    items = [node(name, "4") for name in BIG] + [node(TINY, "100m")]
    first = http_client.post(
        f"{replicas[0].url}/filter", json={"Pod": pod("seed"), "Nodes": {"items": items}}, timeout=10
    )
    assert [n["metadata"]["name"] for n in first.json()["Nodes"]["items"]] == BIG, first.text
    by_name = {"Pod": pod("check"), "NodeNames": [*BIG, TINY]}
    assert judge(http_client.post(f"{replicas[1].url}/filter", json=by_name, timeout=10)) == "ok"
    with sentinel_set.primary.client() as old:
        history_before = old.get(f"{prefix}:storeid")
    assert history_before
    wait_replicated(sentinel_set.primary, sentinel_set.replica)

    answers: list[Answer] = []
    stop = threading.Event()
    loop = threading.Thread(target=filter_loop, args=(replicas, stop, answers), daemon=True)
    loop.start()
    try:
        time.sleep(0.5)
        sentinel_set.primary.kill()
        killed_at = time.monotonic()
        promotion = sentinel_set.wait_promoted(sentinel_set.replica)
        for server in replicas:  # readiness comes back with no help
            server.wait_ready(timeout=20)
        recovered_at = time.monotonic()
        time.sleep(1.0)
    finally:
        stop.set()
        loop.join(30)

    wrong = [a for a in answers if a.kind not in ("ok", "error")]
    assert not wrong, wrong[:5]
    during = [a for a in answers if killed_at < a.at < recovered_at]
    assert any(a.kind == "error" for a in during), "the outage was never seen: the test did not test it"
    for server in replicas:
        after = [a.kind for a in answers if a.at > recovered_at + 0.2 and a.replica == server.name]
        assert after and set(after) == {"ok"}, (server.name, after)
        ready = server.get("/readyz").json()
        assert ready["ready"] is True and ready["redis_primary"] == sentinel_set.replica.address, ready
        # The promoted replica had the nodes by replication: filter by name answers from them.
        assert judge(http_client.post(f"{server.url}/filter", json=by_name, timeout=10)) == "ok"

    with sentinel_set.replica.client() as new:
        assert new.execute_command("ROLE")[0] == "master"
        names = {c["name"] for c in new.client_list()}
        assert {f"kube-gang-extender:{s.name}" for s in replicas} <= names, names
        # A server process other than the one that served the keys: a new store history began there.
        assert new.get(f"{prefix}:server") == new.info("server")["run_id"]
        assert new.get(f"{prefix}:storeid") not in (None, history_before)
    logs = [server.log() for server in replicas]
    assert any("started store history" in log for log in logs), logs
    assert all("Traceback" not in log for log in logs), logs
    took = time.monotonic() - started
    print(f"failover: promoted {promotion:.1f}s after the kill, replicas ready {recovered_at - killed_at:.1f}s after")
    assert took < 30, f"the test took {took:.1f}s"


PASSWORD = "data-" + uuid.uuid4().hex[:10]
SENTINEL_PASSWORD = "sent-" + uuid.uuid4().hex[:10]


def test_the_sentinel_password_and_the_data_password_each_go_where_they_belong(
    start_redis_node: StartNode, replicas: list[ServerProcess]
) -> None:
    """One Sentinel with ``requirepass`` watching a primary with another: the URL (no host) carries the
    primary's password, EXTENDER_REDIS_SENTINEL_PASSWORD the Sentinel's; a wrong Sentinel password is
    not ready and says so, showing neither password."""
    primary = start_redis_node("primary", ["--requirepass", PASSWORD], password=PASSWORD).wait_up()
    conf = "\n".join(
        [
            f"sentinel monitor m 127.0.0.1 {primary.port} 1",
            f"sentinel auth-pass m {PASSWORD}",
            f"requirepass {SENTINEL_PASSWORD}",
            "",
        ]
    )
    sentinel = start_redis_node("sentinel", sentinel_conf=conf, password=SENTINEL_PASSWORD).wait_up()
    base = sentinel_env(sentinel, f"redis://:{PASSWORD}@/0", "auth")
    good = ServerProcess({**base, "EXTENDER_REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD}, "sentinel-good")
    bad = ServerProcess({**base, "EXTENDER_REDIS_SENTINEL_PASSWORD": "wrong-sentinel-pw"}, "sentinel-bad")
    replicas.extend((good, bad))

    good.wait_ready()
    ready = good.get("/readyz").json()
    assert ready["redis_url"] == "redis://:***@/0" and ready["redis_primary"] == primary.address, ready
    answer = http_client.post(
        f"{good.url}/filter", json={"Pod": pod("p"), "Nodes": {"items": [node("n1", "4")]}}, timeout=10
    )
    assert answer.status_code == 200 and answer.json()["Error"] == "", answer.text

    bad.wait_healthy()
    body = readiness_with_reason(bad, 15)
    assert body["ready"] is False and body["redis"] is False, body
    assert body["reason"].startswith(f"Redis Sentinel master 'm' via {sentinel.address} refused the credentials"), body
    assert "EXTENDER_REDIS_SENTINEL_PASSWORD" in body["reason"], body
    for text in (str(body), str(ready), good.log(), bad.log()):
        assert PASSWORD not in text and SENTINEL_PASSWORD not in text and "wrong-sentinel-pw" not in text


def test_sentinels_and_primary_over_tls_with_the_ca_in_the_url(
    start_redis_node: StartNode, replicas: list[ServerProcess], tmp_path: Path
) -> None:
    """TLS-only primary and Sentinel (no plain port at all): the host-less ``rediss://`` URL's CA is
    used for the Sentinels and for the primary they name."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    files = TlsFiles(tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem")
    issued.cert_chain_pems[0].write_to_path(str(files.cert))
    issued.private_key_pem.write_to_path(str(files.key))
    ca.cert_pem.write_to_path(str(files.ca))
    primary = start_redis_node("tls-primary", tls=files).wait_up()
    conf = f"sentinel monitor m 127.0.0.1 {primary.port} 1\n"
    sentinel = start_redis_node("tls-sentinel", sentinel_conf=conf, tls=files).wait_up()
    env = sentinel_env(sentinel, f"rediss:///0?ssl_ca_certs={files.ca}", "tls")
    server = ServerProcess(env, "sentinel-tls")
    replicas.append(server)
    server.wait_ready()
    assert server.get("/readyz").json()["redis_primary"] == primary.address
    answer = http_client.post(
        f"{server.url}/filter", json={"Pod": pod("p"), "Nodes": {"items": [node("n1", "4")]}}, timeout=10
    )
    assert answer.status_code == 200 and answer.json()["Error"] == "", answer.text
    with primary.client() as admin:
        assert "kube-gang-extender:sentinel-tls" in {c["name"] for c in admin.client_list()}


def cluster_port() -> int:
    """A free port at most 55535 whose cluster bus port (10000 higher) is free too."""
    for _ in range(200):
        port = random.randint(20000, 55535)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@pytest.fixture
def cluster_node(start_redis_node: StartNode) -> RedisNode:
    return start_redis_node("cluster", ["--cluster-enabled", "yes"], port=cluster_port()).wait_up()


def test_a_redis_cluster_node_stops_the_start_in_one_line(cluster_node: RedisNode) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXTENDER_")}
    env = {**clean, "EXTENDER_REDIS_URL": cluster_node.url, "EXTENDER_KUBE_MODE": "off"}
    done = subprocess.run([sys.executable, "-m", "app"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: Redis at {cluster_node.address} runs in cluster mode (cluster_enabled:1)")
    assert "Redis topologies" in lines[0]


async def test_a_redis_cluster_node_is_refused_on_every_connection(cluster_node: RedisNode) -> None:
    """Redis down at start and a Cluster node later: each new connection refuses it, before any command."""
    pool = RedisPool(RedisTarget(url=cluster_node.url), PoolOptions(history_prefix="c"))
    client = aredis.Redis(connection_pool=pool.pool)
    try:
        with pytest.raises(UnsupportedRedisError, match=r"cluster mode \(cluster_enabled:1\)"):
            await client.ping()
    finally:
        await client.aclose()
        await pool.aclose()
    with cluster_node.client() as admin:
        assert admin.dbsize() == 0  # the history script never ran there


def test_a_redis_cluster_node_named_by_sentinel_is_refused_at_start(
    cluster_node: RedisNode, start_redis_node: StartNode
) -> None:
    sentinel = start_redis_node("sentinel", sentinel_conf=f"sentinel monitor m 127.0.0.1 {cluster_node.port} 1\n")
    target = RedisTarget(sentinels=(("127.0.0.1", sentinel.wait_up().port),), sentinel_master="m")
    refusal = cluster_refusal(target, timeout=1.0)
    assert refusal is not None and refusal.startswith(f"Redis at {cluster_node.address} runs in cluster mode"), refusal
    # Nothing answering is no refusal: the replica starts and waits for Redis, not ready meanwhile.
    assert cluster_refusal(RedisTarget(sentinels=(("127.0.0.1", free_port()),), sentinel_master="m")) is None


def test_a_watch_event_lost_in_a_failover_comes_back_with_the_next_terms_relist(
    sentinel_set: SentinelSet, fake_kube: FakeKube, replicas: list[ServerProcess]
) -> None:
    """The leading replica writes a node the old primary alone acknowledges (its replica's link cut);
    the primary dies. The promoted replica lacks the node, and nothing in the cluster changes again:
    only the failover ending the leader's term (its lease dropped) brings the node back, by the
    next term's relist. The lease (9 s) outlasts the outage by far, so the leader does not step down
    for want of renewals, as it would after two thirds of it. Binding then works on the new primary."""
    fake_kube.client.create(make_node("n1", cpu="4"))
    web = fake_kube.client.create(make_pod("web", cpu="1"))
    prefix = f"lead{uuid.uuid4().hex[:8]}"
    env = {**sentinel_set.env(), "EXTENDER_REDIS_PREFIX": prefix, "EXTENDER_LEASE_SECONDS": "9"}
    env.update(EXTENDER_KUBE_URL=fake_kube.url, EXTENDER_KUBE_TOKEN=fake_kube.token, EXTENDER_REDIS_TIMEOUT_SECONDS="1")
    server = ServerProcess(env, "sentinel-leader")
    replicas.append(server)
    server.wait_ready()
    with server.client() as http:
        wait_for(lambda: http.get("/v1/nodes/n1").status_code == 200, "n1 in the snapshot")
        wait_replicated(sentinel_set.primary, sentinel_set.replica)
        with sentinel_set.primary.client() as old:
            epoch_before = int(old.get(f"{prefix}:epoch") or 0)
            sentinel_set.replica.signal(signal.SIGSTOP)
            assert old.client_kill_filter(_type="replica") == 1
            fake_kube.client.create(make_node("n2", cpu="4"))
            wait_for(lambda: old.hexists(f"{prefix}:noderv", "n2"), "n2 written to the old primary", 0.02)
        sentinel_set.primary.kill()
        sentinel_set.replica.signal(signal.SIGCONT)
        sentinel_set.wait_promoted(sentinel_set.replica)
        with sentinel_set.replica.client() as new:
            assert not new.hexists(f"{prefix}:noderv", "n2"), "the write must really be lost for this test"
            wait_for(lambda: http.get("/v1/nodes/n2").status_code == 200, "n2 back by a relist", timeout=20)
            assert int(new.get(f"{prefix}:epoch") or 0) > epoch_before, "a new term must have begun"
        server.wait_ready()
        assert http.get("/readyz").json()["is_leader"] is True
        bind = {"PodName": "web", "PodNamespace": "default", "PodUID": web["metadata"]["uid"], "Node": "n2"}
        assert http.post("/bind", json=bind).json() == {"Error": ""}
    assert fake_kube.client.get("pods", "web")["spec"]["nodeName"] == "n2"
    assert "Traceback" not in server.log(), server.log()


def wait_for(predicate: Callable[[], bool], what: str, interval: float = 0.1, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
