"""The preempt verb over HTTP, against a snapshot the server loaded from the (fake) Kubernetes API.

One cluster for the module: nodes with an extended resource (example.com/gpu) kube-scheduler
ignores. The requests carry kube-scheduler's own victims; the answers must add the GPU
holders the extender alone knows about, drop nodes that cannot work, and count PDBs.

Two replicas answer: one following the cluster's release (the fake API server says v1.31.0), one
told to follow 1.37 (EXTENDER_KUBE_VERSION); where their kube-scheduler releases order victims
differently, so do the answers.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack import http_client
from tests.fake_kube.builders import make_node, make_pdb, make_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess

pytestmark = pytest.mark.integration

GPU = "example.com/gpu"
Json = dict[str, Any]


class Cluster:
    def __init__(self, kube: FakeKube, servers: dict[str, ServerProcess], pods: dict[str, Json]) -> None:
        self.kube = kube
        # By the release followed: "1.31" (the fake API server's, read from /version) and "1.37" (set).
        self.servers = servers
        self.server = servers["1.31"]
        self.pods = pods  # by name, as the API server returned them (uids assigned)

    def uid(self, name: str) -> str:
        uid: str = self.pods[name]["metadata"]["uid"]
        return uid


def _pod(name: str, node: str, priority: int, cpu: str, gpu: int = 0, labels: dict[str, str] | None = None) -> Json:
    extra = {GPU: str(gpu)} if gpu else None
    return make_pod(name, node_name=node, priority=priority, cpu=cpu, extra_requests=extra, labels=labels)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Cluster]:
    directory: Path = tmp_path_factory.mktemp("preempt-http")
    kube = FakeKube(directory, bookmark_interval=0.5)
    servers: dict[str, ServerProcess] = {}
    try:
        for name in ("n1", "n2", "n3"):
            kube.client.create(make_node(name, cpu="4", extra_allocatable={GPU: "1"}))
        kube.client.create(make_pdb("db", match_labels={"app": "db"}, disruptions_allowed=0))
        created: dict[str, Json] = {}
        for pod in (
            # n1: kube-scheduler frees CPU (cpu-hog); the GPU is held by a PDB-guarded pod.
            _pod("cpu-hog", "n1", 10, "3"),
            _pod("gpu-db", "n1", 10, "100m", gpu=1, labels={"app": "db"}),
            # n2: the GPU is held by a pod as important as the preemptor: no way to fit.
            _pod("cpu-hog-2", "n2", 10, "3"),
            _pod("gpu-peer", "n2", 1000, "100m", gpu=1),
            # n3: the GPU is free; kube-scheduler's victim is enough.
            _pod("cpu-hog-3", "n3", 10, "3"),
        ):
            created[pod["metadata"]["name"]] = kube.client.create(pod)
        env = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": f"pre{uuid.uuid4().hex[:8]}",
            "EXTENDER_KUBE_MODE": "on",
            "EXTENDER_KUBE_URL": kube.url,
            "EXTENDER_KUBE_TOKEN": kube.token,
        }
        servers["1.31"] = ServerProcess(env, "preempt")
        servers["1.37"] = ServerProcess({**env, "EXTENDER_KUBE_VERSION": "1.37"}, "preempt-1.37")
        for server in servers.values():
            server.wait_healthy()
            server.wait_ready()
        _wait_following(servers["1.31"], "1.31.0")
        yield Cluster(kube, servers, created)
    finally:
        for server in servers.values():
            server.stop()
        kube.stop()


def _wait_following(server: ServerProcess, version: str, timeout: float = 20.0) -> None:
    """Until the replica follows ``version`` (it reads /version beside its initial list)."""
    deadline = time.monotonic() + timeout
    while server.get("/readyz").json().get("kube_version") != version:
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)


def preemptor(policy: str | None = None) -> Json:
    pod = make_pod("high", cpu="1", priority=1000, extra_requests={GPU: "1"})
    pod["metadata"]["uid"] = "uid-high"
    if policy:
        pod["spec"]["preemptionPolicy"] = policy
    return pod


# What kube-scheduler (blind to the GPU) picks: the CPU hog on each node, plus a node we lack.
SCHEDULER_VICTIMS = {"n1": ["cpu-hog"], "n2": ["cpu-hog-2"], "n3": ["cpu-hog-3"], "ghost": ["cpu-hog"]}


def meta_body(cluster: Cluster, pod: Json) -> Json:
    return {
        "Pod": pod,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": cluster.uid(v)} for v in victims], "NumPDBViolations": 0}
            for node, victims in SCHEDULER_VICTIMS.items()
        },
    }


def full_body(cluster: Cluster, pod: Json) -> Json:
    return {
        "Pod": pod,
        "NodeNameToVictims": {
            node: {"Pods": [copy.deepcopy(cluster.pods[v]) for v in victims], "NumPDBViolations": 0}
            for node, victims in SCHEDULER_VICTIMS.items()
        },
    }


def post(cluster: Cluster, body: Json, release: str = "1.31") -> Json:
    response = http_client.post(f"{cluster.servers[release].url}/preempt", json=body, timeout=10.0)
    assert response.status_code == 200, response.text
    answer: Json = response.json()
    return answer


# n1's victims as each release lists them: both of priority 10, so in the scheduler's order (its
# cpu-hog first) from 1.32; before, the PDB-violating gpu-db ahead of the others.
N1_VICTIMS = {"1.31": ["gpu-db", "cpu-hog"], "1.37": ["cpu-hog", "gpu-db"]}


@pytest.mark.parametrize("release", sorted(N1_VICTIMS))
@pytest.mark.parametrize("form", ["meta", "full"])
def test_preempt_adds_gpu_victims_and_drops_hopeless_nodes(cluster: Cluster, form: str, release: str) -> None:
    body = meta_body(cluster, preemptor()) if form == "meta" else full_body(cluster, preemptor())
    answer = post(cluster, body, release)
    assert answer == {
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": cluster.uid(v)} for v in N1_VICTIMS[release]], "NumPDBViolations": 1},
            "n3": {"Pods": [{"UID": cluster.uid("cpu-hog-3")}], "NumPDBViolations": 0},
        }
    }, cluster.servers[release].log()


@pytest.mark.parametrize("form", ["meta", "full"])
def test_preempt_never_policy_gets_no_candidates(cluster: Cluster, form: str) -> None:
    pod = preemptor(policy="Never")
    body = meta_body(cluster, pod) if form == "meta" else full_body(cluster, pod)
    assert post(cluster, body) == {"NodeNameToMetaVictims": {}}
