"""The certificate commands of deploy/README.md, run as written, give a pair that does mutual TLS.

The replica's side loads what the ``kube-gang-extender-tls`` Secret holds (tls.crt, tls.key,
client-ca.crt); kube-scheduler's side what ``gang-scheduler-extender-client`` holds (scheduler.crt,
scheduler.key, serving-ca.crt) and checks the Service's name, as kube-scheduler does.
"""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import cast

import pytest

REPO = Path(__file__).resolve().parents[1]
SERVICE = "kube-gang-extender.kube-gang-extender.svc"


def certificate_commands() -> str:
    text = (REPO / "deploy" / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if "openssl x509" in b]
    return "\n".join(line.strip() for line in block.splitlines())


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to check deploy/README.md's certificate commands", pytrace=False)
    directory = tmp_path_factory.mktemp("deploy-certs")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", certificate_commands()],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return directory


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    """Run one TLS handshake over loopback; the client's peer certificate subject, or the server's error."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    failure: list[BaseException] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as exc:
            failure.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client.wrap_socket(raw, server_hostname=SERVICE) as tls,
        ):
            tls.sendall(b"x")
            peer = tls.getpeercert() or {}
    finally:
        thread.join(5)
        listener.close()
    if failure:
        raise failure[0]
    subject = cast(tuple[tuple[tuple[str, str], ...], ...], peer.get("subject", ()))
    return next((value for rdn in subject for key, value in rdn if key == "commonName"), "")


def server_context(directory: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    context.load_verify_locations(directory / "client-ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def test_the_scheduler_and_the_replica_complete_mutual_tls(issued: Path) -> None:
    client = ssl.create_default_context(cafile=str(issued / "serving-ca.crt"))
    client.load_cert_chain(issued / "scheduler.crt", issued / "scheduler.key")
    assert handshake(server_context(issued), client) == SERVICE


def test_a_caller_without_the_client_certificate_is_refused(issued: Path) -> None:
    client = ssl.create_default_context(cafile=str(issued / "serving-ca.crt"))
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(server_context(issued), client)


def test_the_serving_certificate_is_not_accepted_as_a_caller(issued: Path) -> None:
    """The two CAs are separate: the serving pair cannot call the verbs."""
    client = ssl.create_default_context(cafile=str(issued / "serving-ca.crt"))
    client.load_cert_chain(issued / "tls.crt", issued / "tls.key")
    with pytest.raises((ssl.SSLError, OSError)):
        handshake(server_context(issued), client)
