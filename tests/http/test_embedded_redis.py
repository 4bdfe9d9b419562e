"""The zero-configuration default: with no Redis URL the server runs its own redis-server and never leaks it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.serving.embedded_redis import EmbeddedRedis, EmbeddedRedisError, free_port
from devstack import http_client

REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(c) for c in text)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.split(") ", 1)[1][0] != "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_embedded_redis_starts_and_stops_with_the_server(sig: signal.Signals, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXTENDER_")}
    env["EXTENDER_KUBE_MODE"] = "off"
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--port", str(port)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        # Generous: a start starved by the control planes beside it in the whole suite needs the margin.
        deadline = time.monotonic() + 60
        ready = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = http_client.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if ready.status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert ready is not None and ready.status_code == 200, f"not ready (exit {proc.poll()}):\n{log.read_text()}"
        assert ready.json()["redis"] is True
        redis_pids = [c for c in _children(proc.pid) if "redis-server" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(redis_pids) == 1
        proc.send_signal(sig)
        proc.wait(15)
        assert _wait_gone(redis_pids[0]), f"redis-server outlived the server after {sig.name}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _listening() -> socket.socket:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def test_a_port_taken_after_it_was_picked_is_replaced_by_another() -> None:
    with _listening() as holder:
        server = EmbeddedRedis()
        taken = holder.getsockname()[1]
        server.port = taken  # as if another process bound the picked port first
        with server:
            assert server.port != taken
            with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
                s.sendall(b"PING\r\n")
                assert s.recv(16).startswith(b"+PONG")


def test_a_port_asked_for_that_is_taken_is_an_error_naming_the_cause() -> None:
    with _listening() as holder:
        server = EmbeddedRedis(port=holder.getsockname()[1])
        with pytest.raises(EmbeddedRedisError, match="Address already in use"):
            server.start()
        assert server.pid == 0
