"""Per-process objects the routes share: settings, Redis pool, runtime, scheduler, metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import redis.asyncio as aredis
from extenders.policy import Policy
from extenders.runtime import ClusterRuntime
from fastapi import Request

from app.metrics import Metrics
from app.service import Scheduler
from app.settings import Settings


@dataclass
class AppState:
    settings: Settings
    metrics: Metrics
    policy: Policy
    redis: aredis.Redis | None = None
    runtime: ClusterRuntime | None = None
    scheduler: Scheduler | None = None


def get_state(request: Request) -> AppState:
    return cast(AppState, request.app.state.extender)
