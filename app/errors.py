"""Turn malformed requests into 4xx answers that say what is wrong, never a 500."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from redis.exceptions import RedisError

from app.responses import JSONAnswer
from app.translate import BadRequest
from extenders.scheduling import SnapshotUnavailable, Unevaluable


class ErrorAnswer(BaseModel):
    """The body of every error answer the app makes itself (4xx, 503): what a client can show a person."""

    detail: str
    errors: list[str] | None = None  # 422 for a body of the wrong shape: one line per bad field


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error codes, so the document names the answers clients really get."""
    return {code: {"model": ErrorAnswer, "description": _MEANINGS[code]} for code in codes}


_MEANINGS = {
    400: "the body is not JSON, or is empty",
    401: "a /v1/* call without the operator token (only when EXTENDER_OPERATOR_TOKEN is set)",
    404: "no such object in the snapshot",
    413: "the body is larger than EXTENDER_MAX_BODY_BYTES",
    422: "the body has the wrong shape or says something impossible (a bad quantity, an invalid selector)",
    503: "the extender is starting, or (for /v1/*) Redis is unavailable",
}


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
    """Well-formed JSON of the right shape that says something impossible (a bad quantity, a pod the
    policy cannot evaluate)."""
    return JSONAnswer({"detail": str(exc)}, status_code=422)


async def unavailable(request: Request, exc: Exception) -> JSONAnswer:
    """Operator endpoints answer 503 while Redis is out; the verbs use the protocol's Error instead."""
    detail = str(exc) if isinstance(exc, SnapshotUnavailable) else f"shared state unavailable (Redis: {exc})"
    return JSONAnswer({"detail": detail}, status_code=503)


HANDLERS: dict[type[Exception], Callable[[Request, Exception], Awaitable[JSONAnswer]]] = {
    RequestValidationError: validation_error,
    BadRequest: bad_request,
    Unevaluable: bad_request,
    SnapshotUnavailable: unavailable,
    RedisError: unavailable,
}


def install(app: FastAPI) -> None:
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
