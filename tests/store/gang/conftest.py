"""Shared fixtures of the gang store tests: `store` (the snapshot store on the test's prefix) and `replicas`
(in-process gang replicas over one real Redis, tests/store/gang/replicas.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.gang.bind import BindService
from extenders.gang.config import GangConfig
from extenders.gang.service import GangService
from extenders.sync.store import Store
from tests.gang_support import LocalRuntime, RecordingKube
from tests.store.gang.replicas import Factory, Replica


@pytest.fixture
async def replicas(redis_url: str, redis_prefix: str) -> AsyncIterator[Factory]:
    started: list[tuple[Replica, aredis.Redis]] = []
    kube = RecordingKube()

    async def _start(n: int = 3, **config: Any) -> list[Replica]:
        settings: dict[str, Any] = {"poll_interval_seconds": 0.1, "sweep_interval_seconds": 0.2}
        settings.update(config)
        out = []
        for i in range(n):
            client = aredis.Redis.from_url(redis_url)
            runtime = LocalRuntime(Store(client, redis_prefix), kube, f"r{i}")  # type: ignore[arg-type]
            gangs = GangService(client, runtime, GangConfig(**settings), replica_id=f"r{i}")
            service = Replica(gangs, BindService(gangs))
            await service.start()
            started.append((service, client))
            out.append(service)
        return out

    _start.kube = kube  # type: ignore[attr-defined]
    yield _start
    for service, client in started:
        await service.stop()
        await client.aclose()


@pytest.fixture
def store(redis_async: aredis.Redis, redis_prefix: str) -> Store:
    """The snapshot store the gang scripts share keys with, on the test's Redis prefix."""
    return Store(redis_async, redis_prefix)
