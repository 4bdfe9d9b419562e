"""A watcher for one leadership term against the fake API server, for the watcher's integration tests."""

from __future__ import annotations

import asyncio
from typing import Any

from extenders.aio import cancel_and_wait
from extenders.kube.client import KubeClient
from extenders.sync.store import Store
from extenders.sync.watcher import Watcher


class Feed:
    """A watcher for one leadership term, running in the background."""

    def __init__(self, kube: KubeClient, store: Store) -> None:
        self.kube = kube
        self.store = store
        self.watcher: Watcher | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self, **options: Any) -> Watcher:
        attempt = await self.store.acquire_lease("test#0", 60)
        assert attempt.lease is not None
        self.watcher = Watcher(
            self.kube, self.store, attempt.lease.epoch, backoff_initial=0.05, backoff_max=0.5, **options
        )
        self.task = asyncio.create_task(self.watcher.run())
        return self.watcher

    async def stop(self) -> None:
        if self.task is not None:
            await cancel_and_wait(self.task)
            self.task = None
