"""A Redis client that times every round trip and counts its failures (``extenders.telemetry``)."""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from extenders import lua
from extenders.telemetry import Telemetry


def _command_label(args: tuple[Any, ...]) -> str:
    """The command's name; a Lua script by its file name, so each consistent change has its own series."""
    if not args:
        return "?"
    name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
    name = name.upper()
    if name == "EVALSHA" and len(args) > 1:
        return lua.script_name(str(args[1]))
    return name.split(" ", 1)[0]


class InstrumentedPipeline(Pipeline):
    telemetry: Telemetry

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        started = time.perf_counter()
        try:
            return await super().execute(raise_on_error)
        except Exception:
            self.telemetry.redis_errors.labels("PIPELINE").inc()
            raise
        finally:
            self.telemetry.redis_latency.labels("PIPELINE").observe(time.perf_counter() - started)


class InstrumentedRedis(aredis.Redis):
    """``redis.asyncio.Redis`` recording ``extender_redis_*`` for commands, scripts and pipelines."""

    def __init__(self, *args: Any, telemetry: Telemetry, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.telemetry = telemetry
        # Each command's (latency, errors) series, looked up once: ``labels()`` takes a lock.
        self._series: dict[str, tuple[Any, Any]] = {}

    def _of(self, command: str) -> tuple[Any, Any]:
        series = self._series.get(command)
        if series is None:
            telemetry = self.telemetry
            series = self._series[command] = (
                telemetry.redis_latency.labels(command),
                telemetry.redis_errors.labels(command),
            )
        return series

    def observe(self, command: str, seconds: float, failed: bool = False) -> None:
        """A command sent on a connection of its own (``Store``'s catch-ups), timed by the caller."""
        latency, errors = self._of(command)
        latency.observe(seconds)
        if failed:
            errors.inc()

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        series = self._of(_command_label(args))
        started = time.perf_counter()
        try:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except NoScriptError:
            raise  # the script is loaded and run again: the protocol, not a failure
        except Exception:
            series[1].inc()
            raise
        finally:
            series[0].observe(time.perf_counter() - started)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        pipe = InstrumentedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.telemetry = self.telemetry
        return pipe
