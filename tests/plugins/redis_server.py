"""Real Redis for tests: one redis-server per session (or REDIS_URL), a clean db per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio as aredis

from app.serving.embedded_redis import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a real Redis: $REDIS_URL when set, else a redis-server started for the session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture
def redis_prefix() -> str:
    """A fresh key prefix per test, so tests sharing one Redis never see each other's keys."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def redis_sync(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
async def redis_async(redis_url: str) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()
