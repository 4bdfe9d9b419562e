"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from app.responses import JSONAnswer
from app.state import get_state

router = APIRouter(tags=["operations"])

_SECRET_FIELDS = ("password=", "ssl_password=")


def redacted_url(url: str | None) -> str | None:
    """``url`` with its password (in the user part, or ``password=``/``ssl_password=`` in the query)
    replaced by ``***``."""
    if not url:
        return url
    parts = urlsplit(url)
    head, sep, query = url.partition("?")
    if parts.password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        head = head.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{host}", 1)
    fields = [
        f"{field.partition('=')[0]}=***" if field.lower().startswith(_SECRET_FIELDS) else field
        for field in query.split("&")
    ]
    return head + sep + "&".join(fields)


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
    # Which Redis: two replicas with different ones would each think it is the only one.
    which = {"redis_url": redacted_url(state.settings.redis_url), "redis_embedded": state.redis_embedded}
    if state.runtime is None:
        return JSONAnswer({"ready": False, "reason": "starting", **which}, status_code=503)
    ready, details = await state.runtime.readiness()
    if "error" in details and "reason" not in details:
        # Name the Redis (password masked): a wrong password or CA shows as which server refused what.
        refused = "refused the credentials in EXTENDER_REDIS_URL" if "Authentication" in details["error"] else "failed"
        details["reason"] = f"Redis {which['redis_url']} {refused}: {details['error']}"
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
