"""SIGTERM drains client connections before the shutdown closes them (EXTENDER_SHUTDOWN_DRAIN_SECONDS).

Each test runs a real server process and talks to it over raw sockets, so that what is asserted is
what a client sees on the wire: the ``Connection: close`` header and the server's own close after it.
"""

from __future__ import annotations

import signal
import socket
import time
from urllib.parse import urlsplit

import orjson

from devstack.replica import ServerProcess
from tests.plugins.servers import StartServer

SIGTERM_EXIT = 128 + signal.SIGTERM


def _connect(server: ServerProcess) -> socket.socket:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=5)


def _call(sock: socket.socket, path: str) -> tuple[int, dict[str, str], bytes]:
    """One GET on ``sock``: status, headers (lower-case names) and body."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection without answering {path}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection inside an answer"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (nothing else may arrive)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _exit_within(server: ServerProcess, seconds: float) -> float:
    began = time.monotonic()
    server.proc.wait(timeout=seconds)
    return time.monotonic() - began


def _wait_draining(server: ServerProcess) -> tuple[int, dict[str, str], dict[str, object]]:
    """/readyz on fresh connections until the server reports the drain: the last answer."""
    deadline = time.monotonic() + 10
    while True:
        with _connect(server) as sock:
            status, headers, body = _call(sock, "/readyz")
        document = orjson.loads(body)
        if status == 503 and "shutting down" in str(document.get("reason")):
            return status, headers, document
        assert time.monotonic() < deadline, f"no drain reported: {status} {document}"
        time.sleep(0.05)


def test_sigterm_retires_each_connection_after_its_next_answer(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_SHUTDOWN_DRAIN_SECONDS": "60"})
    idle = _connect(server)
    try:
        status, headers, _ = _call(idle, "/healthz")
        assert status == 200 and headers.get("connection") != "close"
        server.proc.send_signal(signal.SIGTERM)

        # Still listening: a new connection is answered, told to close, and closed.
        status, headers, document = _wait_draining(server)
        assert document["ready"] is False
        assert headers.get("connection") == "close"
        with _connect(server) as fresh:
            status, headers, _ = _call(fresh, "/healthz")
            assert (status, headers.get("connection")) == (200, "close")
            assert _closed_by_server(fresh, 5), "a connection answered during the drain stays open"

        # The connection idle since before the signal: still served, then closed.
        assert server.proc.poll() is None, "the server stopped with a client connection still open"
        status, headers, _ = _call(idle, "/healthz")
        assert (status, headers.get("connection")) == (200, "close")
        assert _closed_by_server(idle, 5)
    finally:
        idle.close()
    # No connection left: the drain ends long before its 60 s.
    assert _exit_within(server, 10) < 10
    assert server.proc.returncode == SIGTERM_EXIT
    assert "draining up to 60 s" in server.log()


def test_the_drain_ends_at_its_deadline_with_a_connection_left_idle(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_SHUTDOWN_DRAIN_SECONDS": "2"})
    with _connect(server) as idle:
        assert _call(idle, "/healthz")[0] == 200
        began = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert not _closed_by_server(idle, 1.0), "an idle connection was closed as the drain began"
        assert _closed_by_server(idle, 10), "the idle connection outlived the drain"
        closed_after = time.monotonic() - began
    assert 1.9 <= closed_after < 8, closed_after
    _exit_within(server, 10)
    assert server.proc.returncode == SIGTERM_EXIT
    assert "1 client connection(s) still open" in server.log()


def test_a_second_sigterm_ends_the_drain_at_once(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_SHUTDOWN_DRAIN_SECONDS": "60"})
    with _connect(server) as idle:
        assert _call(idle, "/healthz")[0] == 200
        server.proc.send_signal(signal.SIGTERM)
        _wait_draining(server)
        assert server.proc.poll() is None
        server.proc.send_signal(signal.SIGTERM)
        assert _exit_within(server, 10) < 10
        assert _closed_by_server(idle, 1)
    assert server.proc.returncode == SIGTERM_EXIT


def test_no_drain_when_the_setting_is_zero(start_server: StartServer) -> None:
    server = start_server(env={"EXTENDER_KUBE_MODE": "off", "EXTENDER_SHUTDOWN_DRAIN_SECONDS": "0"})
    with _connect(server) as idle:
        assert _call(idle, "/healthz")[0] == 200
        server.proc.send_signal(signal.SIGTERM)
        assert _closed_by_server(idle, 5), "the idle connection was not closed at once"
        _exit_within(server, 10)
    assert server.proc.returncode == SIGTERM_EXIT
    assert "draining" not in server.log()
