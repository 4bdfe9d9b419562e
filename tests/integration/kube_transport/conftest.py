"""The fake API servers the transport tests share (one per TLS variant, each shared by a module) and a
client factory parametrized over both transports."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from extenders.kube.transport import TRANSPORTS
from tests.plugins.fake_kube import FakeKube, FakeKubeTLS, MakeKube


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """http + bearer token."""
    server = FakeKube(tmp_path_factory.mktemp("plain"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """https (kubeconfig certificate-authority-data) + bearer token."""
    directory = tmp_path_factory.mktemp("tls-token")
    server = FakeKube(directory, tls=FakeKubeTLS.create(directory))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_client_cert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """https requiring a client certificate; the kubeconfig carries one and no token."""
    directory = tmp_path_factory.mktemp("tls-client-cert")
    server = FakeKube(directory, token="", tls=FakeKubeTLS.create(directory, client_auth=True))
    yield server
    server.stop()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def make_kube(kube_clients: MakeKube, transport: str) -> MakeKube:
    """``make_kube(kubeconfig=... | url=..., token=..., page_size=...)``: a KubeClient over ``transport``."""
    return functools.partial(kube_clients, transport)
