"""The Lua scripts behind every consistent change in Redis, and the one place that loads them."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

import redis.asyncio as aredis
from redis.commands.core import AsyncScript


@cache
def source(name: str) -> str:
    return resources.files(__name__).joinpath(f"{name}.lua").read_text()


def register(redis: aredis.Redis, names: Iterable[str], head: Iterable[str] = ()) -> dict[str, AsyncScript]:
    """Each script of ``names``, after the shared parts ``head`` (e.g. the prelude), by name."""
    prefix = "".join(source(part) + "\n" for part in head)
    return {name: redis.register_script(prefix + source(name)) for name in names}
