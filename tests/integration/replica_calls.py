"""Calls to a server process as the fault tests make them: a bind with the moment it was answered, and a
GET of an operator document that may not be there (yet, or while the server is down)."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.plugins.servers import ServerProcess

Json = dict[str, Any]


async def bind(client: httpx.AsyncClient, server: ServerProcess, pod: Json, node: str) -> tuple[str, float]:
    """One bind call as kube-scheduler makes it: the answer's Error and when it came (monotonic)."""
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    resp = await client.post(f"{server.url}/bind", json=body)
    assert resp.status_code == 200, resp.text
    error: str = resp.json()["Error"]
    return error, time.monotonic()


async def doc(client: httpx.AsyncClient, server: ServerProcess, path: str) -> Json | None:
    resp = await client.get(f"{server.url}{path}", timeout=5)
    if resp.status_code != 200:
        return None
    answer: Json = resp.json()
    return answer
