"""In-process gang "replicas" (GangService and BindService, each with its own Redis client) over one
real Redis and a recording API: what the gang store tests drive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from extenders.gang.bind import BindService
from extenders.gang.service import GangService
from tests.gang_support import RecordingKube, seed


class Replica:
    """One replica's gang rules and bind verb, as the app wires them."""

    def __init__(self, gangs: GangService, binds: BindService) -> None:
        self.gangs = gangs
        self.binds = binds
        self.runtime = gangs.runtime
        self.events = binds.events
        self._tasks = binds._tasks  # the pub/sub listener first (a test stops it)
        self.bind = binds.bind
        self.filter = gangs.filter
        self.gang_status = gangs.gang_status
        self.release_orphan = gangs.release_orphan

    async def start(self) -> None:
        await self.gangs.start()
        await self.binds.start()

    async def stop(self) -> None:
        await self.binds.stop()
        await self.gangs.stop()


Factory = Callable[..., Awaitable[list[Replica]]]


def kube_of(factory: Factory) -> RecordingKube:
    kube: RecordingKube = factory.kube  # type: ignore[attr-defined]
    return kube


async def setup(
    services: list[Replica], kube: RecordingKube, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    for p in pods:
        kube.add(p)
    await seed(services[0].runtime.store, nodes, pods)


def target(pod: dict[str, Any], node: str) -> tuple[str, str, str, str]:
    meta = pod["metadata"]
    return meta["namespace"], meta["name"], meta["uid"], node


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)
