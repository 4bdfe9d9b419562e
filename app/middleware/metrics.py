"""Count and time every request by verb, including those rejected before a route runs."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import Metrics

_VERBS = {
    "/filter": "filter",
    "/prioritize": "prioritize",
    "/preempt": "preempt",
    "/bind": "bind",
    "/v1/explain": "explain",
}


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        verb = _VERBS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if verb is None:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                # Server-side time up to the first byte, for benchmarks and debugging.
                took_ms = (time.perf_counter() - start) * 1000
                headers = [*message.get("headers", []), (b"server-timing", f"app;dur={took_ms:.3f}".encode())]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            observe(self.metrics, verb, status, time.perf_counter() - start)


def observe(metrics: Metrics, verb: str, status: int, seconds: float) -> None:
    """One answered call of ``verb``: its latency, its status, and an error by kind for 4xx and 5xx."""
    metrics.latency.labels(verb).observe(seconds)
    metrics.requests.labels(verb, str(status)).inc()
    if 400 <= status < 500:
        metrics.errors.labels(verb, "bad_request").inc()
    elif status >= 500:
        metrics.errors.labels(verb, "internal").inc()
