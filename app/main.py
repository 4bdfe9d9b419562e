"""The FastAPI application factory and its lifespan (one Redis pool and runtime per process)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import errors
from app.body_limit import BodyLimitMiddleware
from app.hot_verbs import HotVerbsMiddleware
from app.json_body import JsonBodyMiddleware
from app.metrics import Metrics
from app.metrics_middleware import MetricsMiddleware
from app.operator_access import OperatorTokenMiddleware
from app.routes import cache, gangs, health, nodes, verbs
from app.service import Scheduler
from app.settings import Settings, load_settings
from app.state import AppState
from extenders.binding.service import BindService
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.equivalence.metrics import EquivalenceCollector
from extenders.equivalence.shared import SharedConfig, SharedTier
from extenders.gang import DEFAULT_LABELS, GangConfig, GangService, parse_label_pairs
from extenders.kube.events import EventLimits
from extenders.policy import load_policy
from extenders.runtime import ClusterRuntime, RuntimeConfig
from extenders.sync.instrumented_redis import InstrumentedRedis
from extenders.sync.redis_connect import PoolOptions, RedisPool

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
        kube_transport=settings.kube_transport,
        kube_timeout_seconds=settings.kube_timeout_seconds,
        events=settings.events,
        event_limits=EventLimits(qps=settings.events_qps, burst=settings.events_burst),
        min_replicas_ack=settings.redis_min_replicas_ack,
        replicas_ack_timeout_seconds=settings.redis_ack_timeout_seconds,
    )


def redis_pool(settings: Settings) -> RedisPool:
    """The process's one pool (URL or Sentinel); a blocking pool waits for a free connection instead of
    failing a burst. Connections are named after the replica, so CLIENT LIST shows whose they are."""
    name = re.sub(r"[^A-Za-z0-9._:-]", "_", f"kube-gang-extender:{settings.replica_id}")
    options = PoolOptions(
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_timeout_seconds,
        history_prefix=settings.redis_prefix,
        client_name=name,
    )
    return RedisPool(settings.redis_target(), options)


def gang_config(settings: Settings) -> GangConfig:
    return GangConfig(
        window_seconds=settings.gang_window_seconds,
        cooldown_seconds=settings.gang_cooldown_seconds,
        cooldown_max_seconds=settings.gang_cooldown_max_seconds,
        max_assembling=settings.gang_max_assembling,
        arrival_lease_seconds=settings.gang_arrival_lease_seconds,
        idle_seconds=settings.gang_idle_seconds,
        queue_idle_seconds=settings.gang_queue_idle_seconds,
        poll_interval_seconds=settings.gang_poll_interval_seconds,
        sweep_interval_seconds=settings.gang_sweep_interval_seconds,
        assumed_ttl_seconds=settings.assumed_ttl_seconds,
        labels=parse_label_pairs(settings.gang_labels) if settings.gang_labels else DEFAULT_LABELS,
    )


def create_app(settings: Settings | None = None, *, redis_embedded: bool = False) -> FastAPI:
    """Build the app; nothing connects until the lifespan starts (so the OpenAPI export needs no Redis).

    ``redis_embedded``: ``settings.redis_url`` is a private redis-server started for this process."""
    settings = settings or load_settings()
    # A bad policy is a startup error with a clear message, before any port is bound.
    state = AppState(
        settings=settings, metrics=Metrics(), policy=load_policy(settings.policy_file), redis_embedded=redis_embedded
    )
    state.equivalence = EquivalenceCache(
        CacheConfig(
            enabled=settings.equivalence_cache,
            max_classes=settings.equivalence_cache_classes,
            max_entries=settings.equivalence_cache_entries,
            ttl_seconds=settings.equivalence_cache_ttl_seconds,
        )
    )
    state.metrics.registry.register(EquivalenceCollector(state.equivalence, lambda: state.shared))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.redis_configured:
            raise RuntimeError(
                "neither EXTENDER_REDIS_URL nor EXTENDER_REDIS_SENTINELS is set "
                "(python -m app starts an embedded Redis for you)"
            )
        pool = state.redis_pool = redis_pool(settings)
        telemetry = state.metrics.engine
        state.redis = InstrumentedRedis(connection_pool=pool.pool, telemetry=telemetry)
        state.runtime = ClusterRuntime(state.redis, runtime_config(settings), telemetry)
        state.gangs = GangService(state.redis, state.runtime, gang_config(settings), replica_id=settings.replica_id)
        for work in state.gangs.leader_work():
            state.runtime.add_leader_work(work)
        binds = BindService(state.gangs, state.policy)
        state.shared = SharedTier(
            state.redis,
            settings.redis_prefix,
            state.policy,
            state.equivalence,
            SharedConfig(
                enabled=settings.equivalence_cache_shared,
                max_classes=settings.equivalence_cache_classes,
                ttl_seconds=settings.equivalence_cache_ttl_seconds,
            ),
        )
        state.scheduler = Scheduler(
            state.runtime,
            state.policy,
            state.gangs,
            binds,
            state.equivalence,
            state.shared,
            prioritize_ahead=settings.prioritize_ahead,
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

    app = FastAPI(
        title="kube-gang-extender",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.extender = state
    # Added last = outermost: the metrics see requests the body limit rejects.
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(HotVerbsMiddleware, state=state)  # inside the body limit: it reads bodies
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    if settings.operator_token:  # outside the body limit: a request without the token reads no body
        app.add_middleware(OperatorTokenMiddleware, token=settings.operator_token)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
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
