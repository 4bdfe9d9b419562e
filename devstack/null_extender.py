"""An extender that decides nothing: filter passes every candidate, prioritize scores them all 0.

A bare ASGI app (no framework), for the end-to-end benchmark: what kube-scheduler's extender calls
cost by themselves on the same machine, beside what ours cost. Run with
``python -m uvicorn devstack.null_extender:app --port N``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from starlette.types import Receive, Scope, Send

from app.serving.embedded_redis import die_with_parent, free_port, stop_process
from devstack import http_client
from devstack.kube import wait_for

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
    start = time.perf_counter()
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
    # Timed as the extender's own server-timing is: from the call to the first response byte.
    timing = f"app;dur={(time.perf_counter() - start) * 1000:.3f}".encode()
    await send({"type": "http.response.start", "status": status, "headers": [*_JSON, (b"server-timing", timing)]})
    await send({"type": "http.response.body", "body": orjson.dumps(answer)})


class NullExtenderProcess:
    """``devstack.null_extender`` served by uvicorn (uvloop, httptools) in a process of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "uvicorn", "devstack.null_extender:app", "--host", "127.0.0.1"),
                *("--port", str(self.port), "--loop", "uvloop", "--http", "httptools"),
                *("--log-level", "warning", "--no-access-log"),
            ],
            cwd=Path(__file__).resolve().parents[1],
            preexec_fn=die_with_parent,
        )
        wait_for(self._up, 30, "the null extender answers")

    def _up(self) -> bool:
        try:
            return http_client.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def entries(self) -> list[dict[str, Any]]:
        fast = {"urlPrefix": self.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1}
        return [{**fast, "nodeCacheCapable": True, "httpTimeout": "5s"}]

    def stop(self) -> None:
        stop_process(self.proc)
