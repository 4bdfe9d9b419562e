"""Per-process objects the routes share: settings, Redis pool, runtime, scheduler, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import redis.asyncio as aredis
from fastapi import Request

from app.metrics import Metrics
from app.settings import Settings
from extenders.equivalence import EquivalenceCache
from extenders.equivalence.shared import SharedTier
from extenders.gang import GangService
from extenders.policy import Policy
from extenders.runtime import ClusterRuntime
from extenders.scheduling import Scheduler
from extenders.sync.redis_connect import RedisPool


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    policy: Policy
    redis: aredis.Redis | None = None
    redis_pool: RedisPool | None = None  # for /readyz: the primary Sentinel named last
    runtime: ClusterRuntime | None = None
    scheduler: Scheduler | None = None
    gangs: GangService | None = None
    equivalence: EquivalenceCache = field(default_factory=EquivalenceCache)
    shared: SharedTier | None = None  # the equivalence cache's tier in Redis, once the lifespan started
    # True when settings.redis_url is the private redis-server python -m app started (for /readyz).
    redis_embedded: bool = False
    # Set once SIGTERM started the shutdown drain (app.serving.draining): /readyz answers 503.
    draining: bool = False


def get_state(request: Request) -> AppState:
    return cast(AppState, request.app.state.extender)
