"""One real replica per test module (python -m app, real Redis, no Kubernetes API)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.plugins.servers import ServerProcess


@pytest.fixture(scope="module")
def server(redis_url: str) -> Iterator[ServerProcess]:
    env = {
        "EXTENDER_REDIS_URL": redis_url,
        "EXTENDER_REDIS_PREFIX": f"http{uuid.uuid4().hex[:8]}",
        "EXTENDER_KUBE_MODE": "off",
        "EXTENDER_MAX_BODY_BYTES": str(8 * 1024 * 1024),
    }
    proc = ServerProcess(env, "http")
    try:
        proc.wait_healthy()
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        yield client
