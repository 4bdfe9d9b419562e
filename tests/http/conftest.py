"""One real replica per test module (python -m app, real Redis, no Kubernetes API)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import httpx
import pytest

from app.serving.logging_config import CHATTY_LOGGERS
from devstack import http_client
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
    with http_client.client(base_url=server.url, timeout=10.0) as client:
        yield client


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Undo configure_logging: it replaces the root's handlers (pytest's capture among them) and level,
    which would leave later tests in this worker printing every DEBUG line of the HTTP clients."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
