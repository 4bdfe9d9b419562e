"""POST /filter and /prioritize answered below FastAPI's routing.

kube-scheduler calls both inside its scheduling cycle, once per pod each. Starlette's exception
layers, the router, the Request and Response objects cost about 0.2 ms of CPU per call on a small
machine, so here the common case goes straight from the body to the service and back.
Anything else reaches the app unchanged: a body that does not validate is handed over, body and all,
to be answered as every route answers it, and an exception the service raises gets the app's own
handler. The routes stay declared in the app (OpenAPI, tests and the error shapes do not change).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import HANDLERS
from app.responses import render
from app.routes.verbs import CYCLE_VERBS
from app.state import AppState
from app.wire import ExtenderArgs

_HEADERS = [(b"content-type", b"application/json")]


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` as if the body had not been read yet."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class HotVerbsMiddleware:
    """Answers the cycle's verbs itself; passes everything else, and every refused body, to ``app``."""

    def __init__(self, app: ASGIApp, state: AppState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer_of = CYCLE_VERBS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if answer_of is None or scope["method"] != "POST" or self.state.scheduler is None:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away (or the body limit cut it off and answered)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            args = ExtenderArgs.model_validate_json(body)
        except ValidationError:
            await self.app(scope, _replay(body, receive), send)
            return
        try:
            answer: Any = await answer_of(self.state, args)
        except tuple(HANDLERS) as exc:
            handler = next(h for kind, h in HANDLERS.items() if isinstance(exc, kind))
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)
            return
        payload = render(answer)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_HEADERS, (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})
