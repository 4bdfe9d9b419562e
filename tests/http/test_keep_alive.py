"""Idle client connections outlive kube-scheduler's own idle timeout (EXTENDER_HTTP_KEEP_ALIVE_SECONDS).

A server that closes an idle connection while the client sends a call on it fails that call: Go's
transport resends no POST the server dropped, so the server must be the side that waits longer.
"""

from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

import pytest

from tests.plugins.servers import StartServer


def _connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)


def _healthz(conn: http.client.HTTPConnection) -> int:
    conn.request("GET", "/healthz")
    response = conn.getresponse()
    response.read()
    return response.status


def test_an_idle_connection_outlives_uvicorns_five_seconds(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off"})
    conn = _connect(server.url)
    try:
        assert _healthz(conn) == 200
        first = conn.sock
        time.sleep(6.0)
        assert _healthz(conn) == 200
        assert conn.sock is first, "the call went over the connection left idle"
    finally:
        conn.close()


def test_the_idle_timeout_is_the_setting(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_HTTP_KEEP_ALIVE_SECONDS": "1"})
    conn = _connect(server.url)
    try:
        assert _healthz(conn) == 200
        time.sleep(3.0)
        with pytest.raises(ConnectionError):
            _healthz(conn)
    finally:
        conn.close()
