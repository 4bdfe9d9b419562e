"""The one place that loads the Lua scripts and registers them with a Redis client."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

import redis.asyncio as aredis
from redis.commands.core import AsyncScript

# sha1 of each registered script -> its name, for metrics.
_NAMES: dict[str, str] = {}


@cache
def source(name: str) -> str:
    return resources.files(__package__).joinpath(f"{name}.lua").read_text()


def register(redis: aredis.Redis, names: Iterable[str], head: Iterable[str] = ()) -> dict[str, AsyncScript]:
    """Each script of ``names``, after the shared parts ``head`` (e.g. the prelude), by name."""
    prefix = "".join(source(part) + "\n" for part in head)
    scripts = {name: redis.register_script(prefix + source(name)) for name in names}
    _NAMES.update((script.sha, name) for name, script in scripts.items())
    return scripts


def script_name(sha: str) -> str:
    """The name a script was registered under, for metrics ("EVALSHA" when unknown)."""
    return _NAMES.get(sha, "EVALSHA")
