"""Both kube transports over TLS against the fake API server: the kubeconfig's CA, a server certificate for
another name, client-certificate auth; the TLS settings come from the kubeconfig alike, and a refusal is an
httpx error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from extenders.kube.client import BindStatus, KubeApiError
from tests.fake_kube.builders import make_node, make_pod
from tests.integration.kube_transport.support import (
    NODES,
    PODS,
    assert_httpx_error,
    b64,
    cluster_of,
    drain,
    no_client_cert,
    raised_by,
    untrusted_client_cert,
    user_of,
)
from tests.plugins.fake_kube import FakeKube, MakeKube

pytestmark = pytest.mark.integration

# -- kubeconfig CA + token -----------------------------------------------------------------------------


async def test_tls_with_kubeconfig_ca(tls_token: FakeKube, make_kube: MakeKube, transport: str) -> None:
    assert tls_token.url.startswith("https://")
    tls_token.client.create(make_node(f"tls-{transport}"))
    kube = make_kube(kubeconfig=str(tls_token.kubeconfig_path), page_size=1)

    names = [n["metadata"]["name"] for n in (await kube.list(NODES)).items]

    assert f"tls-{transport}" in names
    node = await kube.get(f"{NODES}/tls-{transport}")
    assert node is not None and node["kind"] == "Node"


async def test_tls_untrusted_server_is_an_httpx_error(tls_token: FakeKube, make_kube: MakeKube, tmp_path: Path) -> None:
    def other_ca(config: dict[str, Any]) -> None:
        cluster_of(config)["certificate-authority-data"] = b64(trustme.CA().cert_pem.bytes())

    kube = make_kube(kubeconfig=tls_token.edited_kubeconfig(tmp_path / "other-ca.yaml", other_ca))
    binds_before = tls_token.requests("bind", "pods")

    assert_httpx_error(await raised_by(kube.list(NODES)))
    assert_httpx_error(await raised_by(kube.get(f"{NODES}/anything")))
    assert_httpx_error(await raised_by(drain(kube.watch(PODS, "0", timeout_seconds=5))))
    result = await kube.bind_pod("default", "web", "uid", "n1")
    assert result.status is BindStatus.ERROR, result
    assert tls_token.requests("bind", "pods") == binds_before, "nothing may reach an untrusted server"


async def test_tls_certificate_for_another_name_is_refused(
    tls_token: FakeKube, make_kube: MakeKube, tmp_path: Path
) -> None:
    """The server's certificate names 127.0.0.1 only; the hostname check must be on in both transports."""

    def by_name(config: dict[str, Any]) -> None:
        cluster_of(config)["server"] = tls_token.url.replace("127.0.0.1", "localhost")

    kube = make_kube(kubeconfig=tls_token.edited_kubeconfig(tmp_path / "by-name.yaml", by_name))

    assert_httpx_error(await raised_by(kube.list(NODES)))
    assert (await kube.bind_pod("default", "web", "uid", "n1")).status is BindStatus.ERROR


# -- client-certificate auth ---------------------------------------------------------------------------


async def test_client_certificate_auth(tls_client_cert: FakeKube, make_kube: MakeKube, transport: str) -> None:
    config = yaml.safe_load(tls_client_cert.kubeconfig_path.read_text())
    assert set(user_of(config)) == {"client-certificate-data", "client-key-data"}, "no token with client certs"
    tls_client_cert.client.create(make_node(f"mtls-{transport}"))
    kube = make_kube(kubeconfig=str(tls_client_cert.kubeconfig_path))

    names = [n["metadata"]["name"] for n in (await kube.list(NODES)).items]

    assert f"mtls-{transport}" in names
    pod = tls_client_cert.client.create(make_pod(f"mtls-{transport}"))
    bound = await kube.bind_pod("default", f"mtls-{transport}", pod["metadata"]["uid"], f"mtls-{transport}")
    assert bound.status is BindStatus.BOUND, bound


@pytest.mark.parametrize("edit", [no_client_cert, untrusted_client_cert], ids=["no-cert", "untrusted-cert"])
async def test_client_certificate_required(
    tls_client_cert: FakeKube, make_kube: MakeKube, tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    """The server drops the connection in the TLS 1.3 handshake's tail: an httpx error, never a status."""
    kube = make_kube(kubeconfig=tls_client_cert.edited_kubeconfig(tmp_path / "client.yaml", edit))
    lists_before = tls_client_cert.requests("list", "nodes")

    exc = await raised_by(kube.list(NODES))

    assert not isinstance(exc, KubeApiError), f"the handshake was expected to fail, got a status: {exc}"
    assert_httpx_error(exc)
    assert (await kube.bind_pod("default", "web", "uid", "n1")).status is BindStatus.ERROR
    assert tls_client_cert.requests("list", "nodes") == lists_before
