"""An extender that decides nothing: filter passes every candidate, prioritize scores them all 0.

A bare ASGI app (no framework), for the end-to-end benchmark: what kube-scheduler's extender calls
cost by themselves on the same machine, beside what ours cost. Run with
``python -m uvicorn devstack.null_extender:app --port N``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

_JSON = [(b"content-type", b"application/json")]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    names: list[str] = (orjson.loads(body) or {}).get("NodeNames") or [] if body else []
    path = scope.get("path", "")
    answer: Any
    status = 200
    if path.endswith("/filter"):
        answer = {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    elif path.endswith("/prioritize"):
        answer = [{"Host": name, "Score": 0} for name in names]
    elif path.endswith("/healthz"):
        answer = {"status": "ok"}
    else:
        status, answer = 404, {"detail": "not found"}
    await send({"type": "http.response.start", "status": status, "headers": _JSON})
    await send({"type": "http.response.body", "body": orjson.dumps(answer)})
