"""Read every POST body as JSON, whatever Content-Type the client claims.

kube-scheduler always sends JSON; a hand-written ``curl -d`` sends it as a form. Treating
both as JSON means a bad body always gets the same clear "not valid JSON" answer instead
of a confusing shape error.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_JSON = b"application/json"


class JsonBodyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST":
            headers = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", _JSON)]}
        await self.app(scope, receive, send)
