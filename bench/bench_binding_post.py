"""CPU the extender spends per Binding POST: ``KubeClient.bind_pod`` through the direct lane (aiohttp's
pool without httpx's request objects) against the same client with the lane off, in one process,
batches interleaved so that the machine's drift falls on both alike.

The API server is a minimal aiohttp app in another process that checks the bearer token and answers
201 with a Status, as kube-apiserver answers a Binding: only the client's CPU is measured.

    python -m bench.bench_binding_post [--requests 1000] [--rounds 6] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import subprocess
import sys
import time

from app.serving.embedded_redis import free_port
from devstack.proc import wait_http
from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client

SERVER = """
import sys
from aiohttp import web

TOKEN = "Bearer " + sys.argv[2]
CREATED = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'

async def binding(request):
    if request.headers.get("Authorization") != TOKEN:
        return web.Response(status=401, body=b'{"kind":"Status","code":401}', content_type="application/json")
    await request.read()
    return web.Response(status=201, body=CREATED, content_type="application/json")

async def healthz(request):
    return web.Response(text="ok")

app = web.Application()
app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
app.router.add_get("/healthz", healthz)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


async def _batch(kube: KubeClient, requests: int, concurrency: int, tag: str) -> float:
    """Client CPU microseconds per POST over one batch."""

    async def one(i: int) -> None:
        result = await kube.bind_pod("bench", f"{tag}-{i}", "uid", "node-1")
        if not result.ok:
            raise RuntimeError(f"bind failed: {result}")

    started = time.process_time()
    for first in range(0, requests, concurrency):
        await asyncio.gather(*(one(i) for i in range(first, min(first + concurrency, requests))))
    return (time.process_time() - started) / requests * 1e6


async def _measure(url: str, token: str, args: argparse.Namespace) -> dict[str, object]:
    lanes: dict[str, KubeClient] = {}
    for name in ("direct", "httpx"):
        http = build_http_client("on", url=url, token=token, transport="aiohttp")
        assert http is not None
        lanes[name] = KubeClient(http)
    lanes["httpx"].direct = None
    assert lanes["direct"].direct is not None, "the direct lane is off for this client"
    figures: dict[str, list[float]] = {name: [] for name in lanes}
    try:
        for name, kube in lanes.items():  # warm both pools, untimed
            await _batch(kube, 50, args.concurrency, f"warm-{name}")
        for round_ in range(args.rounds):
            order = list(lanes) if round_ % 2 == 0 else list(reversed(lanes))
            for name in order:
                figures[name].append(await _batch(lanes[name], args.requests, args.concurrency, f"{name}-{round_}"))
    finally:
        for kube in lanes.values():
            await kube.aclose()
    direct, through_httpx = statistics.median(figures["direct"]), statistics.median(figures["httpx"])
    return {
        "requests_per_batch": args.requests,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "client_cpu_us_per_post": {
            "direct_lane": {"median": round(direct, 1), "batches": [round(x, 1) for x in figures["direct"]]},
            "through_httpx": {"median": round(through_httpx, 1), "batches": [round(x, 1) for x in figures["httpx"]]},
        },
        "saved_us_per_post": round(through_httpx - direct, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="POSTs per batch")
    parser.add_argument("--rounds", type=int, default=6, help="batches per lane, interleaved")
    parser.add_argument("--concurrency", type=int, default=1, help="POSTs in flight at once")
    args = parser.parse_args()
    port, token = free_port(), secrets.token_hex(8)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), token])
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/healthz", server)
        print(json.dumps(asyncio.run(_measure(url, token, args)), indent=2))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
