"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from app.redaction import redacted_url
from app.responses import JSONAnswer
from app.state import AppState, get_state

router = APIRouter(tags=["operations"])


def redis_in_use(state: AppState) -> tuple[dict[str, Any], str]:
    """Which Redis this replica uses, for /readyz (passwords masked, the Sentinels' never shown), and
    how a reason names it. Two replicas on different ones would each think theirs is the only one."""
    settings = state.settings
    url = redacted_url(settings.redis_url)
    which: dict[str, Any] = {"redis_url": url, "redis_embedded": state.redis_embedded}
    if not settings.redis_sentinels:
        return which, str(url)
    target = settings.redis_target()
    primary = state.redis_pool.primary if state.redis_pool is not None else None
    which.update(redis_sentinels=target.sentinel_list, redis_sentinel_master=target.sentinel_master)
    which["redis_primary"] = primary  # as Sentinel named it last; null until asked
    label = f"Sentinel master {target.sentinel_master!r} via {target.sentinel_list}"
    if primary:
        label += f" (primary {primary})"
    return which, label


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Ready to schedule: Redis answers and the snapshot is synced",
    responses={503: {"description": "not ready; the body says why"}},
)
async def readyz(request: Request) -> JSONAnswer:
    state = get_state(request)
    if state.runtime is None:
        which, _ = redis_in_use(state)
        return JSONAnswer({"ready": False, "reason": "starting", **which}, status_code=503)
    if state.draining:
        which, _ = redis_in_use(state)
        reason = "shutting down: answering the calls that still come while clients retire their connections"
        return JSONAnswer({"ready": False, "reason": reason, **which}, status_code=503)
    ready, details = await state.runtime.readiness()
    which, label = redis_in_use(state)  # after the round trip: the primary Sentinel named may have changed
    if "error" in details and "reason" not in details:
        # Name the Redis (password masked): a wrong password or CA shows as which server refused what.
        where = "EXTENDER_REDIS_URL"
        if state.settings.redis_sentinels:
            where += " or EXTENDER_REDIS_SENTINEL_PASSWORD"
        refused = f"refused the credentials in {where}" if "Authentication" in details["error"] else "failed"
        details["reason"] = f"Redis {label} {refused}: {details['error']}"
    return JSONAnswer({"ready": ready, **details, **which}, status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    state = get_state(request)
    if state.gangs is not None and state.runtime is not None:
        # Gauges read from Redis when scraped; a slow or absent Redis leaves their last values.
        try:
            async with asyncio.timeout(2.0):
                await state.gangs.sample_metrics()
                await state.runtime.sample_metrics()
        except (RedisError, OSError, TimeoutError):
            pass
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
