"""Real server processes for integration tests: ``python -m app`` on free loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from devstack.replica import ServerProcess

__all__ = ["ServerProcess", "StartServer", "server_processes", "start_server"]

StartServer = Callable[..., ServerProcess]


@pytest.fixture
def start_server(redis_url: str, redis_prefix: str) -> Iterator[StartServer]:
    """Factory: ``start_server(env={...}, name="r1")`` starts a replica sharing the test's Redis."""
    started: list[ServerProcess] = []

    def _start(env: dict[str, str] | None = None, name: str | None = None, ready: bool = False) -> ServerProcess:
        base = {"EXTENDER_REDIS_URL": redis_url, "EXTENDER_REDIS_PREFIX": redis_prefix}
        server = ServerProcess({**base, **(env or {})}, name or f"r{len(started) + 1}")
        started.append(server)
        server.wait_healthy()
        if ready:
            server.wait_ready()
        return server

    yield _start
    for server in started:
        server.stop()


@pytest.fixture
def server_processes() -> Iterator[list[ServerProcess]]:
    """Servers a test starts with settings of its own (another Redis, say): appended by the test, stopped here."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.stop()
