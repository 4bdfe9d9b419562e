"""HTTPS, certificate reload and mutual TLS of ``python -m app``, against real server processes.

Certificates come from trustme CAs. "Refused" means the TLS handshake fails: no request reaches the
app (its request counter does not move).
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography import x509

from app.serving.embedded_redis import free_port
from devstack.metrics import sample_total
from tests.http.test_command_line import run_app
from tests.plugins.servers import ServerProcess

BIND_ARGS = {"PodName": "nobody", "PodNamespace": "default", "PodUID": "0", "Node": "nowhere"}
FILTER_ARGS = {"Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}, "NodeNames": ["n1"]}


def write_pair(leaf: trustme.LeafCert, directory: Path, stem: str) -> tuple[Path, Path]:
    """The leaf's chain and key as files, each replaced atomically (as a Secret volume updates)."""
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    for path, data in ((cert, b"".join(b.bytes() for b in leaf.cert_chain_pems)), (key, leaf.private_key_pem.bytes())):
        staged = path.with_suffix(".staged")
        staged.write_bytes(data)
        os.replace(staged, path)
    return cert, key


def trusting(ca: trustme.CA, client: trustme.LeafCert | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if client is not None:
        client.configure_cert(context)
    return context


def served_serial(port: int, ca: trustme.CA) -> int:
    """The serial number of the certificate a new connection to ``port`` is served."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        trusting(ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def bind_requests(server: ServerProcess, health_url: str | None = None) -> float:
    text = httpx.get(f"{health_url or server.url}/metrics", verify=server.verify, timeout=5).text
    return sample_total(text, "extender_requests_total", verb="bind")


@pytest.fixture
def server_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def pair(server_ca: trustme.CA, tmp_path: Path) -> tuple[Path, Path]:
    return write_pair(server_ca.issue_cert("127.0.0.1"), tmp_path, "serving")


StartTLS = Callable[..., ServerProcess]


@pytest.fixture
def start_tls(redis_url: str, redis_prefix: str, pair: tuple[Path, Path]) -> Iterator[StartTLS]:
    """Factory: a replica serving HTTPS with ``pair``; ``client_tls`` is what the test's requests use."""

    def _start(client_tls: ssl.SSLContext, health_port: int | None = None, **env: str) -> ServerProcess:
        base = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": redis_prefix,
            "EXTENDER_KUBE_MODE": "off",
            "EXTENDER_TLS_CERT_FILE": str(pair[0]),
            "EXTENDER_TLS_KEY_FILE": str(pair[1]),
        }
        server = ServerProcess({**base, **env}, "tls", health_port=health_port, client_tls=client_tls)
        started.append(server)
        return server.wait_healthy()

    started: list[ServerProcess] = []
    yield _start
    for server in started:
        server.stop()


def test_https_is_served_with_the_configured_pair(start_tls: StartTLS, server_ca: trustme.CA) -> None:
    server = start_tls(trusting(server_ca))
    assert server.url.startswith("https://")
    assert server.get("/healthz").json() == {"status": "ok"}
    with server.client() as client:
        assert client.post("/filter", json=FILTER_ARGS).status_code == 200
    # Not trusted by a client that does not trust the CA; no plain HTTP on the port.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/healthz", verify=trusting(trustme.CA()), timeout=5)
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)


def test_a_new_pair_is_picked_up_by_new_connections_without_a_restart(
    start_tls: StartTLS, server_ca: trustme.CA, pair: tuple[Path, Path], tmp_path: Path
) -> None:
    server = start_tls(trusting(server_ca), EXTENDER_TLS_RELOAD_INTERVAL_SECONDS="0.2")
    first = served_serial(server.port, server_ca)
    # Half a rotation: a new certificate whose key is not there yet. The old pair stays served.
    new_ca = trustme.CA()
    staged_cert, staged_key = write_pair(new_ca.issue_cert("127.0.0.1"), tmp_path, "next")
    os.replace(staged_cert, pair[0])
    time.sleep(1.0)
    assert served_serial(server.port, server_ca) == first
    assert "not reloaded" in server.log() and "does not match the certificate" in server.log()
    # The key follows: new connections are served the new pair, signed by the new CA.
    os.replace(staged_key, pair[1])
    deadline = time.monotonic() + 10
    while True:
        try:
            served_serial(server.port, new_ca)
            break
        except ssl.SSLError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the new pair was not served within 10 s:\n{server.log()}") from None
            time.sleep(0.1)
    assert "TLS certificate reloaded" in server.log()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/healthz", verify=trusting(server_ca), timeout=5)
    assert httpx.post(f"{server.url}/filter", json=FILTER_ARGS, verify=trusting(new_ca), timeout=5).status_code == 200
    assert server.proc.poll() is None  # the same process: no restart


@pytest.mark.parametrize("verb", ["bind", "filter"])
def test_mutual_tls_refuses_callers_without_a_certificate_of_the_ca(
    start_tls: StartTLS, server_ca: trustme.CA, tmp_path: Path, verb: str
) -> None:
    client_ca = trustme.CA()
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(client_ca.cert_pem.bytes())
    scheduler_cert = client_ca.issue_cert(common_name="kube-scheduler")
    server = start_tls(trusting(server_ca, scheduler_cert), EXTENDER_TLS_CLIENT_CA_FILE=str(ca_file))
    body = BIND_ARGS if verb == "bind" else FILTER_ARGS
    before = bind_requests(server)
    # No client certificate; one of another CA (here: the one that signed the server's).
    for context in (trusting(server_ca), trusting(server_ca, server_ca.issue_cert(common_name="kubelet"))):
        with pytest.raises(httpx.TransportError):
            httpx.post(f"{server.url}/{verb}", json=body, verify=context, timeout=5)
    with pytest.raises(httpx.TransportError):  # the health endpoints too: use the health port for probes
        httpx.get(f"{server.url}/healthz", verify=trusting(server_ca), timeout=5)
    assert bind_requests(server) == before
    # Signed by the configured CA: served.
    with server.client() as client:
        answer = client.post(f"/{verb}", json=body)
    assert answer.status_code == 200, answer.text
    if verb == "bind":
        assert answer.json()["Error"] and bind_requests(server) == before + 1


def test_under_mutual_tls_the_health_port_serves_probes_in_plain_http(
    start_tls: StartTLS, server_ca: trustme.CA, tmp_path: Path
) -> None:
    client_ca = trustme.CA()
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(client_ca.cert_pem.bytes())
    health_port = free_port()
    server = start_tls(
        trusting(server_ca, client_ca.issue_cert(common_name="kube-scheduler")),
        health_port=health_port,
        EXTENDER_TLS_CLIENT_CA_FILE=str(ca_file),
    )
    server.wait_ready()
    health = f"http://127.0.0.1:{health_port}"
    assert httpx.get(f"{health}/healthz", timeout=5).json() == {"status": "ok"}
    ready = httpx.get(f"{health}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["mode"] == "standalone"
    assert "extender_requests_total" in httpx.get(f"{health}/metrics", timeout=5).text
    # Nothing else: no verbs, no operator endpoints, no API document.
    assert httpx.post(f"{health}/bind", json=BIND_ARGS, timeout=5).status_code == 404
    assert httpx.post(f"{health}/filter", json=FILTER_ARGS, timeout=5).status_code == 404
    assert httpx.get(f"{health}/v1/nodes", timeout=5).status_code == 404
    assert httpx.get(f"{health}/openapi.json", timeout=5).status_code == 404
    # The main port still wants the certificate.
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/healthz", verify=trusting(server_ca), timeout=5)
    # Both stop with the process.
    server.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{health}/healthz", timeout=2)


# Start-up errors: one line naming the setting, exit code 2, before anything listens.


def _error_line(**env: str) -> str:
    done = run_app(EXTENDER_KUBE_MODE="off", EXTENDER_REDIS_URL="redis://127.0.0.1:1/0", **env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_missing_unreadable_or_mismatched_files_stop_the_start_naming_the_setting(
    pair: tuple[Path, Path], server_ca: trustme.CA, tmp_path: Path
) -> None:
    cert, key = str(pair[0]), str(pair[1])
    line = _error_line(EXTENDER_TLS_CERT_FILE=str(tmp_path / "absent.crt"), EXTENDER_TLS_KEY_FILE=key)
    assert line.startswith("error: EXTENDER_TLS_CERT_FILE=") and "No such file" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert, EXTENDER_TLS_KEY_FILE=str(tmp_path))  # a directory
    assert "EXTENDER_TLS_KEY_FILE=" in line and "cannot read" in line
    other_key = write_pair(server_ca.issue_cert("127.0.0.1"), tmp_path, "other")[1]
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert, EXTENDER_TLS_KEY_FILE=str(other_key))
    assert "EXTENDER_TLS_KEY_FILE=" in line and "does not match the certificate in EXTENDER_TLS_CERT_FILE" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=key, EXTENDER_TLS_KEY_FILE=key)  # a key where the certificate goes
    assert "EXTENDER_TLS_CERT_FILE=" in line and "no PEM certificate" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert, EXTENDER_TLS_KEY_FILE=cert)
    assert "EXTENDER_TLS_KEY_FILE=" in line and "private key" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert)
    assert "EXTENDER_TLS_KEY_FILE is not set" in line
    line = _error_line(EXTENDER_TLS_KEY_FILE=key)
    assert "EXTENDER_TLS_CERT_FILE is not set" in line
    line = _error_line(EXTENDER_TLS_CLIENT_CA_FILE=cert)
    assert "EXTENDER_TLS_CLIENT_CA_FILE=" in line and "need HTTPS" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert, EXTENDER_TLS_KEY_FILE=key, EXTENDER_TLS_CLIENT_CA_FILE=key)
    assert "EXTENDER_TLS_CLIENT_CA_FILE=" in line and "no PEM certificate" in line
    line = _error_line(EXTENDER_TLS_CERT_FILE=cert, EXTENDER_TLS_KEY_FILE=key, EXTENDER_TLS_CLIENT_CA_FILE="/nope")
    assert "EXTENDER_TLS_CLIENT_CA_FILE='/nope'" in line and "cannot read" in line


def test_a_health_port_in_use_or_equal_to_the_main_port_stops_the_start() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _error_line(EXTENDER_HEALTH_PORT=str(port))
        assert line.startswith(f"error: EXTENDER_HEALTH_PORT={port}: cannot listen") and "in use" in line
    done = run_app("--port", "18080", EXTENDER_KUBE_MODE="off", EXTENDER_HEALTH_PORT="18080")
    assert done.returncode == 2 and "EXTENDER_HEALTH_PORT=18080: the same port as --port" in done.stderr
