"""The compose stack's certificates and kubeconfigs (devstack/compose.py), checked without Docker:
the identities the API server will see, the names it serves, who may read what, and the probe."""

from __future__ import annotations

import http.server
import ipaddress
import os
import ssl
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from devstack.compose import APISERVER_URL, SERVICE_IP, kube_client, probe, write_pki
from devstack.controlplane import EXTENDER_USER
from tests.http_stub import one_path_handler


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    assert write_pki(directory, app_owner=(os.getuid(), os.getgid()))
    return directory


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _subject(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def test_client_certificates_carry_the_identities_rbac_sees(pki: Path) -> None:
    scheduler = _cert(pki / "scheduler.crt")
    assert _subject(scheduler, NameOID.COMMON_NAME) == ["system:kube-scheduler"]
    assert _subject(scheduler, NameOID.ORGANIZATION_NAME) == []
    admin = _cert(pki / "admin.crt")
    assert _subject(admin, NameOID.ORGANIZATION_NAME) == ["system:masters"]
    assert _subject(_cert(pki / "probe.crt"), NameOID.ORGANIZATION_NAME) == []
    ca = _cert(pki / "ca.crt")
    for name in ("scheduler", "admin", "probe", "apiserver", "kube-scheduler"):
        assert _cert(pki / f"{name}.crt").issuer == ca.subject
    # The extender is the ServiceAccount deploy/ binds its ClusterRole to, by a token.
    token, user, _, groups = (pki / "tokens.csv").read_text().strip().split(",", 3)
    assert user == EXTENDER_USER and len(token) >= 32 and "system:serviceaccounts" in groups


def test_the_api_server_certificate_names_every_address_it_is_reached_by(pki: Path) -> None:
    san = _cert(pki / "apiserver.crt").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"kube-apiserver", "localhost", "kubernetes.default.svc"} <= set(san.get_values_for_type(x509.DNSName))
    assert ipaddress.ip_address(SERVICE_IP) in san.get_values_for_type(x509.IPAddress)


def test_private_files_are_private_and_the_ca_key_is_not_kept(pki: Path) -> None:
    for name in ("apiserver.key", "sa.key", "scheduler.key", "tokens.csv", "admin.key", "extender.kubeconfig"):
        assert stat.S_IMODE((pki / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((pki / "ca.crt").stat().st_mode) == 0o644
    assert not (pki / "ca.key").exists(), "the CA key is not kept: nothing signs after the set-up"


def test_a_second_run_keeps_what_the_first_made(pki: Path) -> None:
    token = (pki / "tokens.csv").read_text()
    assert not write_pki(pki)
    assert (pki / "tokens.csv").read_text() == token


def test_each_kubeconfig_loads_the_way_the_extender_loads_it(pki: Path) -> None:
    for name in ("admin", "scheduler", "probe", "extender"):
        with kube_client(pki / f"{name}.kubeconfig") as client:
            assert str(client.base_url).rstrip("/") == APISERVER_URL
    with kube_client(pki / "extender.kubeconfig") as client:
        token = (pki / "tokens.csv").read_text().split(",", 1)[0]
        auth = client.auth
        assert auth is not None
        assert next(auth.auth_flow(client.build_request("GET", "/api"))).headers["Authorization"] == f"Bearer {token}"


_Readyz = one_path_handler("/readyz", (200, b"ok"), (500, b"[-]etcd failed"))


@pytest.fixture
def api_server(pki: Path) -> Iterator[str]:
    """An HTTPS server with the API server's certificate that requires a client certificate of the CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
    context.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Readyz)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_probe_verifies_the_server_presents_its_certificate_and_wants_ok(pki: Path, api_server: str) -> None:
    assert probe(f"{api_server}/readyz", pki) == (True, "200 ok")
    healthy, detail = probe(f"{api_server}/livez", pki)
    assert not healthy and detail.startswith("500")
