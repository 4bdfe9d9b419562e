"""Turn malformed requests into 4xx answers that say what is wrong, never a 500."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from redis.exceptions import RedisError

from app.responses import JSONAnswer
from app.service import BadRequest, SnapshotUnavailable


def _describe(error: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
    msg = str(error.get("msg", "invalid"))
    return f"{loc}: {msg}" if loc else msg


async def validation_error(request: Request, exc: Exception) -> JSONAnswer:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        ctx = next((e.get("ctx") or {} for e in errors if e.get("type") == "json_invalid"), {})
        detail = f"request body is not valid JSON: {ctx.get('error', 'decode error')}"
        return JSONAnswer({"detail": detail}, status_code=400)
    if any(e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",) for e in errors):
        return JSONAnswer({"detail": "request body is empty: a JSON object is required"}, status_code=400)
    messages = [_describe(dict(e)) for e in errors]
    return JSONAnswer(
        {"detail": "request body has the wrong shape: " + "; ".join(messages[:10]), "errors": messages[:50]},
        status_code=422,
    )


async def bad_request(request: Request, exc: Exception) -> JSONAnswer:
    """Well-formed JSON of the right shape that says something impossible (a bad quantity)."""
    return JSONAnswer({"detail": str(exc)}, status_code=422)


async def unavailable(request: Request, exc: Exception) -> JSONAnswer:
    """Operator endpoints answer 503 while Redis is out; the verbs use the protocol's Error instead."""
    detail = str(exc) if isinstance(exc, SnapshotUnavailable) else f"shared state unavailable (Redis: {exc})"
    return JSONAnswer({"detail": detail}, status_code=503)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(SnapshotUnavailable, unavailable)
    app.add_exception_handler(RedisError, unavailable)
