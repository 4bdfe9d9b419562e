"""The FastAPI application factory and its lifespan (one Redis pool and runtime per process)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import errors, translate
from app.metrics import Metrics, RedisPrimaryCollector
from app.middleware import (
    BodyLimitMiddleware,
    ExtenderApp,
    HotVerbs,
    JsonBodyMiddleware,
    MetricsMiddleware,
    OperatorTokenMiddleware,
)
from app.routes import cache, gangs, health, nodes, verbs
from app.settings import Settings, load_settings
from app.state import AppState
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.equivalence.metrics import EquivalenceCollector
from extenders.equivalence.shared import SharedConfig, SharedTier
from extenders.gang import BindService, GangService
from extenders.policy import load_policy
from extenders.runtime import ClusterRuntime
from extenders.scheduling import Scheduler
from extenders.sync.instrumented_redis import InstrumentedRedis
from extenders.sync.redis_connect import RedisPool

log = logging.getLogger(__name__)

DESCRIPTION = (
    "A Kubernetes scheduler extender: kube-scheduler's filter, prioritize, preempt and bind verbs "
    "with shared Redis state, so every replica answers every call."
)


def create_app(settings: Settings | None = None, *, redis_embedded: bool = False) -> FastAPI:
    """Build the app; nothing connects until the lifespan starts (so the OpenAPI export needs no Redis).

    ``redis_embedded``: ``settings.redis_url`` is a private redis-server started for this process."""
    settings = settings or load_settings()
    # A bad policy is a startup error with a clear message, before any port is bound.
    state = AppState(
        settings=settings, metrics=Metrics(), policy=load_policy(settings.policy_file), redis_embedded=redis_embedded
    )
    state.equivalence = EquivalenceCache(settings.config(CacheConfig))
    state.metrics.registry.register(EquivalenceCollector(state.equivalence, lambda: state.shared))
    state.metrics.registry.register(
        RedisPrimaryCollector(lambda: state.redis_pool.primary_changes if state.redis_pool is not None else 0)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.redis_configured:
            raise RuntimeError(
                "neither EXTENDER_REDIS_URL nor EXTENDER_REDIS_SENTINELS is set "
                "(python -m app starts an embedded Redis for you)"
            )
        # One pool per process (URL or Sentinel); it blocks for a free connection instead of failing a burst.
        pool = state.redis_pool = RedisPool(settings.redis_target(), settings.pool_options)
        pool.start()
        telemetry = state.metrics.engine
        state.redis = InstrumentedRedis(connection_pool=pool.pool, telemetry=telemetry)
        state.runtime = ClusterRuntime(state.redis, settings.runtime_config, telemetry)
        state.gangs = GangService(state.redis, state.runtime, settings.gang_config, replica_id=settings.replica_id)
        for work in state.gangs.leader_work():
            state.runtime.add_leader_work(work)
        binds = BindService(state.gangs, state.policy, snapshot_max_age=settings.bind_snapshot_max_age_ms / 1000)
        state.shared = SharedTier(
            state.redis,
            settings.redis_prefix,
            state.policy,
            state.equivalence,
            settings.config(SharedConfig),
        )
        state.scheduler = Scheduler(
            state.runtime,
            state.policy,
            state.gangs,
            binds,
            state.equivalence,
            state.shared,
            prioritize_ahead=settings.prioritize_ahead,
            snapshot_max_age=settings.filter_snapshot_max_age_ms / 1000,
            shape_ahead=translate.host_priorities,
        )
        await state.runtime.start()
        await state.gangs.start()
        await binds.start()
        if state.shared.enabled:
            await state.shared.start()
        log.info("replica %s serving with Redis prefix %r", settings.replica_id, settings.redis_prefix)
        try:
            yield
        finally:
            await state.shared.stop()
            await binds.stop()
            await state.gangs.stop()
            await state.runtime.stop()
            await state.redis.aclose()
            await pool.aclose()  # a pool passed in explicitly is not closed by aclose()

    app = ExtenderApp(
        title="kube-gang-extender",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.extender = state
    # Added last = outermost: the metrics see requests the body limit rejects.
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    if settings.operator_token:  # outside the body limit: a request without the token reads no body
        app.add_middleware(OperatorTokenMiddleware, token=settings.operator_token)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    app.hot_verbs = HotVerbs(app.routed, state, state.metrics, settings.max_body_bytes)
    errors.install(app)
    app.include_router(verbs.router)
    if settings.operator_api:  # off: /v1/* answers 404 and is left out of the OpenAPI document
        app.include_router(verbs.operator_router)
        app.include_router(nodes.router)
        app.include_router(gangs.router)
        app.include_router(cache.router)
    app.include_router(health.router)
    return app


def create_health_app(app: FastAPI) -> FastAPI:
    """Only /healthz, /readyz and /metrics of ``app``, sharing its state: what the plain-HTTP health
    port (EXTENDER_HEALTH_PORT) serves, for probes and scrapers that present no client certificate.
    It has no lifespan of its own: ``app``'s lifespan starts and stops what both read."""
    health_app = FastAPI(title="kube-gang-extender health", openapi_url=None, docs_url=None, redoc_url=None)
    health_app.state.extender = app.state.extender
    health_app.include_router(health.router)
    return health_app
