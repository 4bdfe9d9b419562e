"""The runtime facade (kube off): readiness, node documents, the assumed-pod sweeper; and kube config modes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.asyncio as aredis
import yaml

from extenders.kube.config import KubeConfigError, build_http_client, find_kubeconfig
from extenders.runtime import ClusterRuntime, RuntimeConfig, node_document
from extenders.sync.store import Op
from tests.store.helpers import node, pod


async def test_runtime_without_kubernetes(redis_async: aredis.Redis, redis_prefix: str) -> None:
    runtime = ClusterRuntime(
        redis_async,
        RuntimeConfig(
            prefix=redis_prefix, replica_id="r1", kube_mode="off", assumed_ttl_seconds=0.2, sweep_interval_seconds=0.05
        ),
    )
    assert runtime.kube is None and runtime.elector is None and not runtime.is_leader()
    await runtime.start()
    try:
        ready, details = await runtime.readiness()
        assert ready and details["redis"] and details["synced"] is None and details["replica_id"] == "r1"
        # no watcher: node facts come from requests, pods from binds
        assert await runtime.store.refresh_node_if_newer(node("n1", labels={"zone": "a"}))
        assumed = await runtime.store.assume_pod(pod("u1"), "n1", None, ttl=runtime.config.assumed_ttl_seconds)
        assert assumed.ok
        snap = await runtime.snapshot()
        doc = node_document(snap.nodes["n1"])
        assert doc["name"] == "n1" and doc["generation"] == snap.nodes["n1"].generation == snap.generation
        assert doc["allocatable"] == {"cpu": 4000, "memory": 8 << 30, "pods": 110}
        assert doc["requested"] == {"cpu": 100, "memory": 1 << 20, "pods": 1}
        assert doc["pods"] == [{"namespace": "default", "name": "pod-u1", "uid": "u1", "assumed": True}]
        assert doc["labels"] == {"zone": "a"} and doc["taints"] == [] and doc["unschedulable"] is False
        # the sweeper expires the never-confirmed reservation
        for _ in range(100):
            if not (await runtime.snapshot()).nodes["n1"].pods:
                break
            await asyncio.sleep(0.05)
        assert node_document((await runtime.snapshot()).nodes["n1"])["requested"] == {"pods": 0}
    finally:
        await runtime.stop()


async def test_readiness_waits_for_the_leaders_initial_list(redis_async: aredis.Redis, redis_prefix: str) -> None:
    # a kube URL nobody answers: this replica leads but cannot list, so the store never becomes synced
    runtime = ClusterRuntime(
        redis_async,
        RuntimeConfig(
            prefix=redis_prefix, replica_id="r1", kube_mode="on", kube_url="http://127.0.0.1:9", lease_seconds=1.0
        ),
    )
    await runtime.start()
    try:
        for _ in range(100):
            if runtime.is_leader():
                break
            await asyncio.sleep(0.02)
        ready, details = await runtime.readiness()
        assert not ready and details["synced"] is False and details["leader"] == "r1" and details["is_leader"]
        assert "initial list" in details["reason"]
        attempt = await runtime.store.acquire_lease("other#1", 5)  # held by r1
        assert attempt.lease is None
        await runtime.store.mark_synced(runtime.elector.epoch if runtime.elector else 0, "{}")
        ready, details = await runtime.readiness()
        assert ready and details["synced"] is True
    finally:
        await runtime.stop()
    assert await runtime.store.leader() is None  # released on stop


async def test_auto_mode_without_a_cluster_is_not_ready_and_says_how_to_fix_it(
    redis_async: aredis.Redis, redis_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    auto = ClusterRuntime(redis_async, RuntimeConfig(prefix=redis_prefix, kube_mode="auto"))
    assert auto.kube is None
    ready, details = await auto.readiness()
    assert not ready and details["mode"] == "no-cluster"
    assert "KUBECONFIG" in details["reason"] and "EXTENDER_KUBE_MODE=off" in details["reason"]
    # asking for standalone explicitly is a ready state: node facts come with the requests
    off = ClusterRuntime(redis_async, RuntimeConfig(prefix=redis_prefix, kube_mode="off"))
    ready, details = await off.readiness()
    assert ready and details["mode"] == "standalone" and "reason" not in details


async def test_readiness_reports_redis_down(redis_prefix: str) -> None:
    client = aredis.Redis.from_url("redis://127.0.0.1:9/0", socket_connect_timeout=0.2)
    runtime = ClusterRuntime(client, RuntimeConfig(prefix=redis_prefix, kube_mode="off"))
    ready, details = await runtime.readiness()
    assert not ready and details["redis"] is False and "error" in details
    await client.aclose()


def write_kubeconfig(path: Path, server: str, user: dict[str, object] | None) -> Path:
    config: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", **({"user": "u"} if user is not None else {})}}],
        "current-context": "x",
    }
    if user is not None:
        config["users"] = [{"name": "u", "user": user}]
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def no_kube_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


async def test_kube_modes(no_kube_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_http_client("off", url="http://x") is None
    assert build_http_client("auto") is None  # nothing configured anywhere
    with pytest.raises(KubeConfigError, match="no Kubernetes configuration"):
        build_http_client("on")
    with pytest.raises(KubeConfigError, match="kube mode"):
        build_http_client("sometimes")
    with pytest.raises(KubeConfigError, match="not found"):
        build_http_client("auto", kubeconfig=str(no_kube_env / "missing"))

    explicit = build_http_client("on", url="http://api:6443/", token="t0k")
    assert explicit is not None and str(explicit.base_url) == "http://api:6443"
    assert explicit.headers["Authorization"] == "Bearer t0k"
    await explicit.aclose()

    path = write_kubeconfig(no_kube_env / "kc.yaml", "http://from-env:8080", {"token": "abc"})
    monkeypatch.setenv("KUBECONFIG", str(path))
    from_env = build_http_client("auto")
    assert from_env is not None and str(from_env.base_url) == "http://from-env:8080"
    await from_env.aclose()

    anonymous = write_kubeconfig(no_kube_env / "anon.yaml", "http://anon:8080", None)
    client = build_http_client("on", kubeconfig=str(anonymous))
    assert client is not None and str(client.base_url) == "http://anon:8080"
    await client.aclose()

    broken = no_kube_env / "broken.yaml"
    broken.write_text("clusters: [")
    with pytest.raises(KubeConfigError):
        build_http_client("auto", kubeconfig=str(broken))


def test_in_cluster_service_account_comes_first(no_kube_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = no_kube_env / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "namespace").write_text("kube-system")
    (account / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(no_kube_env / "kc.yaml", "http://other", None)))
    config = find_kubeconfig(service_account=account)
    assert config is not None
    single = config.get()
    assert single is not None and single.cluster.server == "https://10.0.0.1:443"
    assert single.user is not None and single.user.token_file == str(account / "token")


def test_node_document_for_a_node_known_only_from_its_pods() -> None:
    from extenders.model import NodeInfo

    doc = node_document(NodeInfo.build("ghost", None, [pod("a", "ghost", cpu=250)], 9))
    assert doc["exists"] is False and doc["allocatable"] == {} and doc["generation"] == 9
    assert doc["requested"] == {"cpu": 250, "memory": 1 << 20, "pods": 1}


def test_op_for_terminal_pod_is_a_delete() -> None:
    assert Op.pod(pod("u", "n", phase="Failed")) == Op.delete_pod("u")
