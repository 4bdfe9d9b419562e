"""POST /filter, /prioritize and /bind answered in front of FastAPI.

kube-scheduler calls them for every pod, filter and prioritize inside its scheduling cycle. FastAPI's
own layers (telemetry, exception middlewares, the router, Request and Response objects) cost more CPU
per call than the answer of a warm class, so ``ExtenderApp`` hands these calls to ``HotVerbs``
before any of them, and everything else to FastAPI unchanged. ``HotVerbs`` does what the layers it
skips would: the body limit (the same 413), the metrics and server-timing header, the app's exception
handlers. A body failing validation goes to the app, body and all, to be answered as every route
answers it. The routes stay declared in the app (OpenAPI, tests and the error shapes do not change).

Filter reads a pod of a shape it has met before through that shape (``app.pod_shapes``). A
prioritize whose scores this replica computed ahead (same pod uid and resourceVersion, same nodes)
is answered after reading only the pod's identity and the names: the pod itself was read by filter.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import translate
from app.errors import HANDLERS
from app.metrics import Metrics
from app.middleware.body_limit import declared_too_big, too_big_answer
from app.middleware.metrics import observe
from app.pod_shapes import PodShapes, PodShapesCollector
from app.responses import render
from app.routes.verbs import CYCLE_VERBS, filter_pod
from app.state import AppState
from app.wire import CycleCall

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


class _Invalid(Exception):
    """The body did not validate."""


class HotVerbs:
    """Answers the cycle's verbs; passes every body it does not take to ``app`` (FastAPI's way in)."""

    def __init__(self, app: ASGIApp, state: AppState, metrics: Metrics, max_bytes: int) -> None:
        self.app = app
        self.state = state
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.shapes = PodShapes()
        metrics.registry.register(PodShapesCollector(self.shapes))

    @staticmethod
    def takes(scope: Scope) -> bool:
        return scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in CYCLE_VERBS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        if self.state.scheduler is None:
            await self.app(scope, receive, send)  # the app answers 503
            return
        if declared_too_big(scope, self.max_bytes):
            await self._answer(send, scope["path"], start, 413, too_big_answer(self.max_bytes))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_bytes:  # chunked, no length: refused as it arrives
                await self._answer(send, scope["path"], start, 413, too_big_answer(self.max_bytes))
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        path = scope["path"]
        answer: Any = None
        if path == "/prioritize":
            answer = self._ahead(body)
        if answer is None:
            try:
                answer = await self._verb(path, body, receive)
            except _Invalid:
                await self.app(scope, _replay(body, receive), send)
                return
            except tuple(HANDLERS) as exc:
                handler = next(h for kind, h in HANDLERS.items() if isinstance(exc, kind))
                response = await handler(Request(scope, receive), exc)
                await self._answer(send, path, start, response.status_code, bytes(response.body))
                return
        await self._answer(send, path, start, 200, render(answer))

    async def _verb(self, path: str, body: bytes, receive: Receive) -> Any:
        """The verb's answer; raises ``_Invalid`` for a body the app must answer (only the body's
        reading: a verb that has acted is never sent to the app to act again)."""
        verb = CYCLE_VERBS[path]
        try:
            inputs = self.shapes.filter_inputs(body) if path == "/filter" else None
            args = verb.body.model_validate_json(body) if inputs is None else None
        except ValidationError as exc:
            raise _Invalid from exc
        if inputs is not None:
            return await filter_pod(self.state, inputs.pod, inputs.resource_version, inputs.names)
        return await verb.answer(self.state, args, receive)

    def _ahead(self, body: bytes) -> Any:
        """Prioritize's answer when its scores were computed ahead for this very call, else None."""
        scheduler = self.state.scheduler
        if scheduler is None or not scheduler.prioritize_ahead:  # nothing computed ahead: no second read
            return None
        try:
            call = CycleCall.model_validate_json(body)
        except ValidationError:
            return None
        if call.NodeNames is None or call.Nodes is not None:
            return None
        meta = call.Pod.metadata
        scores = scheduler.scores_ahead(meta.uid, meta.resourceVersion or "", call.NodeNames)
        return translate.prioritize_answer(scores) if scores is not None else None

    async def _answer(self, send: Send, path: str, start: float, status: int, payload: bytes) -> None:
        verb = path.lstrip("/")
        took = time.perf_counter() - start
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    *_HEADERS,
                    (b"content-length", str(len(payload)).encode()),
                    # Server-side time up to the first byte, as the metrics middleware gives every other call.
                    (b"server-timing", f"app;dur={took * 1000:.3f}".encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
        observe(self.metrics, verb, status, took)


class ExtenderApp(FastAPI):
    """FastAPI, with the cycle's verbs answered in front of it (``hot_verbs``; None: through the routes)."""

    hot_verbs: HotVerbs | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.hot_verbs
        if hot is not None and hot.takes(scope):
            await hot(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    async def routed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request through FastAPI's layers and routes, never ``hot_verbs``."""
        await super().__call__(scope, receive, send)
