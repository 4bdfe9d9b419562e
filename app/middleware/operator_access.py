"""The operator endpoints (``/v1/*``) behind a bearer token, when ``EXTENDER_OPERATOR_TOKEN`` is set.

A pure ASGI middleware on the path prefix, so every operator route (and any added later) is covered
and a refused request reaches no route and reads no body. The verbs kube-scheduler calls and the
health endpoints are not affected: kube-scheduler's extender configuration carries no token (mutual
TLS guards the verbs) and probes carry none.
"""

from __future__ import annotations

import hmac

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

OPERATOR_PREFIX = "/v1"


def is_operator_path(path: str) -> bool:
    return path == OPERATOR_PREFIX or path.startswith(OPERATOR_PREFIX + "/")


class OperatorTokenMiddleware:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                scheme, _, credentials = bytes(value).partition(b" ")
                # Constant time: the comparison does not tell how much of a guess was right.
                return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._expected)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_operator_path(scope.get("path", "")) or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps({"detail": "the operator endpoints need 'Authorization: Bearer <EXTENDER_OPERATOR_TOKEN>'"})
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="kube-gang-extender"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
