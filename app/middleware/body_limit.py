"""Reject request bodies over a size limit with 413 before anything parses them.

A pure ASGI middleware so it also covers chunked bodies without a Content-Length.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def too_big_answer(max_bytes: int) -> bytes:
    """The 413's body."""
    return orjson.dumps({"detail": f"request body exceeds the limit of {max_bytes} bytes (EXTENDER_MAX_BODY_BYTES)"})


def declared_too_big(scope: Scope, max_bytes: int) -> bool:
    """The request's Content-Length says more than ``max_bytes`` (a chunked body is counted as it comes)."""
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value) > max_bytes
            except ValueError:
                return False
    return False


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send) -> None:
        body = too_big_answer(self.max_bytes)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declared_too_big(scope, self.max_bytes):
            await self._reject(send)
            return
        seen = 0
        rejected = False

        async def limited_receive() -> Message:
            nonlocal seen, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # Answer now and make the app see a client that went away: whatever it
                    # tries to send after this is dropped by guarded_send.
                    rejected = True
                    await self._reject(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not rejected:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)
