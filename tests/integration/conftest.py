"""Fixtures the watcher's integration tests share: a client of the fake API server and a watcher feed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client
from extenders.sync.store import Store
from tests.integration.watch_feed import Feed
from tests.plugins.fake_kube import FakeKube


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubeClient]:
    http = build_http_client("on", kubeconfig=str(fake_kube.kubeconfig_path))  # token auth via kubeconfig
    assert http is not None
    client = KubeClient(http, page_size=7)  # several pages per list
    yield client
    await client.aclose()


@pytest.fixture
async def feed(kube: KubeClient, redis_async: aredis.Redis, redis_prefix: str) -> AsyncIterator[Feed]:
    f = Feed(kube, Store(redis_async, redis_prefix))
    yield f
    await f.stop()
