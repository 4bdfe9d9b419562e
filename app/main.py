"""The FastAPI application factory and its lifespan (one Redis pool and runtime per process)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.asyncio as aredis
from extenders.policy import load_policy
from extenders.runtime import ClusterRuntime, RuntimeConfig
from fastapi import FastAPI

from app import errors
from app.body_limit import BodyLimitMiddleware
from app.metrics import Metrics
from app.metrics_middleware import MetricsMiddleware
from app.routes import health, nodes, verbs
from app.service import Scheduler
from app.settings import Settings
from app.state import AppState

log = logging.getLogger(__name__)

DESCRIPTION = (
    "A Kubernetes scheduler extender: kube-scheduler's filter, prioritize, preempt and bind verbs "
    "with shared Redis state, so every replica answers every call."
)


def runtime_config(settings: Settings) -> RuntimeConfig:
    return RuntimeConfig(
        prefix=settings.redis_prefix,
        replica_id=settings.replica_id,
        lease_seconds=settings.lease_seconds,
        assumed_ttl_seconds=settings.assumed_ttl_seconds,
        kube_mode=settings.kube_mode,
        kube_url=settings.kube_url,
        kube_token=settings.kube_token,
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; nothing connects until the lifespan starts (so the OpenAPI export needs no Redis)."""
    settings = settings or Settings()
    # A bad policy is a startup error with a clear message, before any port is bound.
    state = AppState(settings=settings, metrics=Metrics(), policy=load_policy(settings.policy_file))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.redis_url:
            raise RuntimeError("EXTENDER_REDIS_URL is not set (python -m app starts an embedded Redis for you)")
        state.redis = aredis.Redis.from_url(
            settings.redis_url, max_connections=settings.redis_max_connections, health_check_interval=10
        )
        state.runtime = ClusterRuntime(state.redis, runtime_config(settings))
        state.scheduler = Scheduler(state.runtime, state.policy)
        await state.runtime.start()
        log.info("replica %s serving with Redis prefix %r", settings.replica_id, settings.redis_prefix)
        try:
            yield
        finally:
            await state.runtime.stop()
            await state.redis.aclose()

    app = FastAPI(
        title="kube-gang-extender",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.extender = state
    # Added last = outermost: the metrics see requests the body limit rejects.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    errors.install(app)
    app.include_router(verbs.router)
    app.include_router(nodes.router)
    app.include_router(health.router)
    return app
