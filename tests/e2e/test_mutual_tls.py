"""kube-scheduler schedules through our replicas over mutual TLS, the README's production setting.

The replicas serve HTTPS with a certificate of the cluster CA and require client certificates of a
CA dedicated to the extender's callers; kube-scheduler's extender entries carry ``enableHTTPS: true``
and a ``tlsConfig`` with the cluster CA and a client certificate of that CA. The balancer in front
is a TCP proxy, so the TLS sessions run end to end between kube-scheduler and a replica. Callers
without such a certificate (none, or one the cluster CA signed, as every kubelet has) are refused
at the handshake, before any request reaches the app.
"""

from __future__ import annotations

import secrets
import ssl
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devstack.controlplane import ControlPlane
from devstack.kube import Kube, resources
from devstack.stack import Stack
from devstack.tls import MutualTLS
from tests.e2e.conftest import Cluster, StartStack

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

LEGACY = ("pod-group.scheduling.sigs.k8s.io/name", "pod-group.scheduling.sigs.k8s.io/min-available")
BIND_ARGS = {"PodName": "nobody", "PodNamespace": "default", "PodUID": "0", "Node": "nowhere"}


@pytest.fixture(scope="module")
def mutual_tls(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> MutualTLS:
    return MutualTLS.issue(control_plane, tmp_path_factory.mktemp("mutual-tls"))


@pytest.fixture(scope="module")
def tls_stack(stack_factory: StartStack, mutual_tls: MutualTLS) -> Stack:
    return stack_factory(tls=mutual_tls)


@pytest.fixture
def cluster(kube: Kube, tls_stack: Stack) -> Iterator[Cluster]:
    namespace = f"e2e-mtls-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    c = Cluster(kube, tls_stack, namespace)
    yield c
    c.cleanup()


def test_the_scheduler_is_configured_for_mutual_tls(tls_stack: Stack, mutual_tls: MutualTLS) -> None:
    assert tls_stack.scheduler is not None
    config = yaml.safe_load(tls_stack.scheduler.config_path.read_text())
    for entry in config["extenders"]:
        assert entry["urlPrefix"].startswith("https://")
        assert entry["enableHTTPS"] is True
        assert entry["tlsConfig"] == mutual_tls.scheduler_tls_config()
    for replica in tls_stack.replicas:
        assert replica.url.startswith("https://")
        ready = httpx.get(f"{replica.probe_url}/readyz", timeout=5).json()  # the plain health port
        assert ready["ready"] is True and ready["redis_embedded"] is False


def test_plain_pods_and_a_gang_are_bound_through_mutual_tls(cluster: Cluster) -> None:
    nodes = cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    binds_before = cluster.stack.requests("bind")
    filters_before = cluster.stack.requests("filter")
    plain = ["plain-0", "plain-1"]
    for name in plain:
        cluster.pod(name, requests=resources(cpu="1"))
    gang = [f"trainer-{i}" for i in range(3)]
    for name in gang:
        cluster.pod(name, requests=resources(cpu="3"), labels={LEGACY[0]: "trainer", LEGACY[1]: "3"})
    placed = cluster.wait_bound(plain + gang)
    assert set(placed.values()) <= set(nodes)
    # Three CPUs each on nodes of four: one member per node, whatever the plain pods took.
    assert len({placed[name] for name in gang}) == 3
    assert all(count <= 4 for count in Counter(placed.values()).values())
    # The replicas answered them: kube-scheduler's calls came through the TLS sessions.
    assert cluster.stack.requests("bind") - binds_before >= len(plain + gang)
    assert cluster.stack.requests("filter") > filters_before
    assert cluster.stack.scheduler is not None
    assert "x509" not in cluster.stack.scheduler.log(), "kube-scheduler reported a certificate error"


def _bind(url: str, verify: ssl.SSLContext | bool) -> httpx.Response:
    return httpx.post(f"{url}/bind", json=BIND_ARGS, verify=verify, timeout=10)


def test_bind_is_refused_without_a_client_certificate_of_the_callers_ca(
    tls_stack: Stack, mutual_tls: MutualTLS, control_plane: ControlPlane, tmp_path: Path
) -> None:
    url = tls_stack.url  # the balancer kube-scheduler calls
    before = tls_stack.requests("bind")
    # No client certificate at all.
    with pytest.raises(httpx.TransportError):
        _bind(url, mutual_tls.client_context(with_certificate=False))
    # A client certificate the cluster CA signed (as every kubelet's is): not the callers' CA.
    cluster_cert, cluster_key = control_plane.issue_server_cert(tmp_path, "kubelet.example")
    foreign = mutual_tls.client_context(with_certificate=False)
    foreign.load_cert_chain(str(cluster_cert), str(cluster_key))
    with pytest.raises(httpx.TransportError):
        _bind(url, foreign)
    # Plain HTTP to the TLS port.
    with pytest.raises(httpx.TransportError):
        _bind(url.replace("https://", "http://"), True)
    assert tls_stack.requests("bind") == before, "a refused call reached a replica"
    # With the callers' CA's certificate, as kube-scheduler presents it: answered (an Error: no such pod).
    answer = _bind(url, mutual_tls.client_context())
    assert answer.status_code == 200 and answer.json()["Error"]
    assert tls_stack.requests("bind") == before + 1


def test_the_health_port_serves_probes_in_plain_http_and_nothing_else(tls_stack: Stack) -> None:
    replica = tls_stack.replicas[0]
    assert replica.probe_url.startswith("http://")
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(f"{replica.probe_url}{path}", timeout=5).status_code == 200, path
    ready: dict[str, Any] = httpx.get(f"{replica.probe_url}/readyz", timeout=5).json()
    assert ready["redis_url"].startswith("redis://127.0.0.1:")
    assert httpx.get(f"{replica.probe_url}/v1/nodes", timeout=5).status_code == 404
    assert httpx.post(f"{replica.probe_url}/bind", json=BIND_ARGS, timeout=5).status_code == 404
