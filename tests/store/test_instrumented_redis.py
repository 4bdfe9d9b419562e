"""Redis round trips are timed by command (a Lua script by its name) and failures counted."""

from __future__ import annotations

import socket

import pytest
from redis.asyncio import ConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError

from extenders.sync.instrumented_redis import InstrumentedRedis
from extenders.sync.store import Store
from extenders.telemetry import Telemetry


def calls(telemetry: Telemetry, command: str) -> float:
    for metric in telemetry.redis_latency.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == {"command": command}:
                return sample.value
    return 0.0


def errors(telemetry: Telemetry, command: str) -> float:
    return float(telemetry.redis_errors.labels(command)._value.get())


async def test_commands_scripts_and_pipelines_each_have_their_series(redis_url: str, redis_prefix: str) -> None:
    telemetry = Telemetry()
    client = InstrumentedRedis(connection_pool=ConnectionPool.from_url(redis_url), telemetry=telemetry)
    try:
        store = Store(client, redis_prefix)
        await store.generation()  # a GET
        attempt = await store.acquire_lease("r1#0", 10)  # a Lua script
        assert attempt.lease is not None
        before = calls(telemetry, "PIPELINE")
        async with client.pipeline(transaction=False) as pipe:
            pipe.get(f"{redis_prefix}:a")
            pipe.get(f"{redis_prefix}:b")
            await pipe.execute()
        pipelined = calls(telemetry, "PIPELINE") - before
    finally:
        await client.aclose()
        await client.connection_pool.disconnect()
    assert calls(telemetry, "GET") >= 1
    # A script not loaded yet on this Redis answers NOSCRIPT and runs again: not an error.
    assert calls(telemetry, "lease_acquire") >= 1 and errors(telemetry, "lease_acquire") == 0
    assert pipelined == 1
    assert calls(telemetry, "EVALSHA") == 0


async def test_failed_round_trips_are_counted() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    telemetry = Telemetry()
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{port}", socket_connect_timeout=0.5)
    client = InstrumentedRedis(connection_pool=pool, telemetry=telemetry)
    try:
        with pytest.raises(RedisConnectionError):
            await client.get("k")
    finally:
        await client.aclose()
        await client.connection_pool.disconnect()
    assert errors(telemetry, "GET") == 1
