"""Three replicas, one Redis, one fake API server: every replica serves the same snapshot, and when
the leader is killed the survivors keep following the cluster within the lease time."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from devstack import http_client
from tests.fake_kube.builders import make_node, make_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess, StartServer

pytestmark = pytest.mark.integration

LEASE_SECONDS = 3.0
MI = 2**20


@dataclass
class PodBook:
    node: str  # "" while pending
    cpu: int  # millicores
    memory: int  # bytes
    done: bool = False  # Succeeded / Failed: no longer counted


class Cluster:
    """What the test did to the API, kept on the side: the independent expectation."""

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake
        self.nodes: set[str] = set()
        self.pods: dict[str, PodBook] = {}
        self.rng = random.Random(42)

    def add_node(self, name: str) -> None:
        self.fake.client.create(make_node(name, cpu="16", memory="64Gi"))
        self.nodes.add(name)

    def add_pod(self, name: str, node: str, via_binding: bool) -> None:
        cpu, memory = self.rng.choice([50, 100, 250, 500]), self.rng.choice([64, 128, 256]) * MI
        if via_binding:
            self.fake.client.create(make_pod(name, cpu=f"{cpu}m", memory=f"{memory // MI}Mi"))
            response = self.fake.client.bind(name, node)
            assert response.status_code == 201, response.text
        else:
            self.fake.client.create(make_pod(name, cpu=f"{cpu}m", memory=f"{memory // MI}Mi", node_name=node))
        self.pods[name] = PodBook(node, cpu, memory)

    def add_pending(self, name: str) -> None:
        self.fake.client.create(make_pod(name, cpu="100m", memory="64Mi"))
        self.pods[name] = PodBook("", 100, 64 * MI)

    def delete_pod(self, name: str) -> None:
        self.fake.client.delete("Pod", name)
        del self.pods[name]

    def finish_pod(self, name: str) -> None:
        self.fake.client.patch("Pod", name, {"status": {"phase": "Succeeded"}}, status=True)
        self.pods[name].done = True

    def relabel_pod(self, name: str) -> None:
        self.fake.client.patch("Pod", name, {"metadata": {"labels": {"touched": "yes"}}})

    def expected(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {n: {"requested": {"pods": 0}, "pods": set()} for n in self.nodes}
        for name, book in self.pods.items():
            if not book.node or book.done:
                continue
            doc = out.setdefault(book.node, {"requested": {"pods": 0}, "pods": set()})
            req = doc["requested"]
            req["cpu"] = req.get("cpu", 0) + book.cpu
            req["memory"] = req.get("memory", 0) + book.memory
            req["pods"] += 1
            doc["pods"].add(name)
        return out

    def bound(self) -> list[str]:
        return sorted(n for n, b in self.pods.items() if b.node and not b.done)


def observed(replica: ServerProcess, names: list[str], client: httpx.Client) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        response = client.get(f"{replica.url}/v1/nodes/{name}")
        if response.status_code == 404:
            continue
        response.raise_for_status()
        doc = response.json()
        out[name] = {"requested": doc["requested"], "pods": {p["name"] for p in doc["pods"]}}
    return out


def wait_converged(replicas: list[ServerProcess], cluster: Cluster, timeout: float) -> float:
    """Seconds until every replica's node documents equal the expectation; fails with the diff."""
    started = time.monotonic()
    expected = cluster.expected()
    names = sorted(expected)
    pending = list(replicas)
    diff: dict[str, Any] = {}
    with http_client.client(timeout=5.0) as client:
        while pending:
            for replica in list(pending):
                seen = observed(replica, names, client)
                if seen == expected:
                    pending.remove(replica)
                else:
                    diff = {
                        n: {"expected": expected.get(n), "seen": seen.get(n)}
                        for n in names
                        if seen.get(n) != expected.get(n)
                    }
            if pending and time.monotonic() - started > timeout:
                first = dict(list(diff.items())[:3])
                raise AssertionError(
                    f"{[r.name for r in pending]} not converged within {timeout}s; "
                    f"{len(diff)} nodes differ, e.g. {first}\n{pending[0].log()}"
                )
            if pending:
                time.sleep(0.1)
    return time.monotonic() - started


def readiness(replica: ServerProcess) -> dict[str, Any]:
    body: dict[str, Any] = http_client.get(f"{replica.url}/readyz", timeout=5.0).json()
    return body


def test_replicas_share_the_snapshot_and_survive_the_leader(fake_kube: FakeKube, start_server: StartServer) -> None:
    base = {"EXTENDER_LEASE_SECONDS": str(LEASE_SECONDS), "EXTENDER_KUBE_MODE": "on", "EXTENDER_LOG_LEVEL": "warning"}
    by_url = {**base, "EXTENDER_KUBE_URL": fake_kube.url, "EXTENDER_KUBE_TOKEN": fake_kube.token}
    by_kubeconfig = {**base, "KUBECONFIG": str(fake_kube.kubeconfig_path)}
    replicas = [
        start_server(env=by_url, name="r1"),
        start_server(env=by_url, name="r2"),
        start_server(env=by_kubeconfig, name="r3"),
    ]
    for replica in replicas:
        replica.wait_ready()

    cluster = Cluster(fake_kube)
    for i in range(50):
        cluster.add_node(f"node-{i:02d}")
    for j in range(500):
        node = f"node-{cluster.rng.randrange(50):02d}"
        if j % 10 == 0:
            cluster.add_pending(f"pod-{j:03d}")
        else:
            cluster.add_pod(f"pod-{j:03d}", node, via_binding=j % 3 == 0)
    wait_converged(replicas, cluster, timeout=20)

    # updates and deletes
    bound = cluster.bound()
    for name in bound[:30]:
        cluster.delete_pod(name)
    for name in bound[30:45]:
        cluster.finish_pod(name)
    for name in bound[45:60]:
        cluster.relabel_pod(name)
    fake_kube.client.delete("Node", "node-49", namespace=None)
    cluster.nodes.discard("node-49")  # its pods keep naming it, so it stays in the snapshot without facts
    wait_converged(replicas, cluster, timeout=10)

    # every replica agrees on who leads; kill the leader without any clean-up
    leaders = {readiness(r)["leader"] for r in replicas}
    assert len(leaders) == 1
    leader_name = leaders.pop()
    leader = next(r for r in replicas if r.name == leader_name)
    assert readiness(leader)["is_leader"]
    leader.kill()
    killed_at = time.monotonic()
    survivors = [r for r in replicas if r is not leader]

    for j in range(500, 540):
        cluster.add_pod(f"pod-{j:03d}", f"node-{cluster.rng.randrange(49):02d}", via_binding=j % 2 == 0)
    for name in cluster.bound()[:10]:
        cluster.delete_pod(name)
    cluster.add_node("node-50")
    cluster.add_pod("pod-on-new-node", "node-50", via_binding=True)

    wait_converged(survivors, cluster, timeout=LEASE_SECONDS + 5.0)
    took = time.monotonic() - killed_at
    assert took <= LEASE_SECONDS + 5.0
    new_leaders = {readiness(r)["leader"] for r in survivors}
    assert len(new_leaders) == 1 and new_leaders != {leader_name}
    for replica in survivors:
        body = readiness(replica)
        assert body["ready"] and body["synced"], body
