"""The image's HEALTHCHECK command: where it probes and what it calls healthy."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from app.healthcheck import main, probe, probe_url
from app.serving.embedded_redis import free_port
from tests.http_stub import one_path_handler


def test_the_health_port_wins_and_tls_switches_the_main_port_to_https() -> None:
    assert probe_url({}, "/healthz") == "http://127.0.0.1:8888/healthz"
    assert probe_url({"EXTENDER_TLS_CERT_FILE": "/tls/tls.crt"}, "/readyz", 9443) == "https://127.0.0.1:9443/readyz"
    env = {"EXTENDER_TLS_CERT_FILE": "/tls/tls.crt", "EXTENDER_HEALTH_PORT": "8081"}
    assert probe_url(env, "/healthz") == "http://127.0.0.1:8081/healthz"


_Handler = one_path_handler("/healthz", (200, b'{"status":"ok"}'), (503, b'{"ready":false}'))


@pytest.fixture
def server_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_200_is_healthy_and_anything_else_is_not(server_port: int) -> None:
    assert probe(f"http://127.0.0.1:{server_port}/healthz") == (True, '200 {"status":"ok"}')
    healthy, detail = probe(f"http://127.0.0.1:{server_port}/readyz")
    assert not healthy and detail.startswith("503")
    healthy, _ = probe(f"http://127.0.0.1:{free_port()}/healthz", timeout=1)
    assert not healthy


def test_the_exit_status_follows_the_probe(server_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXTENDER_HEALTH_PORT", raising=False)
    monkeypatch.delenv("EXTENDER_TLS_CERT_FILE", raising=False)
    assert main(["--port", str(server_port)]) == 0
    assert main(["/readyz", "--port", str(server_port)]) == 1
