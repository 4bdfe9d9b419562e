"""Gang release latency: from the last member's bind call to every member's call answered (bound).

Starts a private redis-server, the fake kube-apiserver (tests/fake_kube) and three replicas
(``python -m app``); for each gang size, creates the gang's pods, holds all but one member's
bind call (spread round-robin over the replicas), then times the last member's call until
every call has answered: ``release_ms``. Needs the app's bind verb wired to
``extenders.gang.BindService``. Two figures put it in context:

- ``api_only_ms``: the same number of Bindings POSTed straight to the fake API server through
  the extender's own API client (``build_http_client``), 8 at a time, from one process -- what
  creating them costs there, without any gang machinery;
- ``coordination_ms``: the same release with three BindService instances in this process and
  an API stand-in that binds instantly -- what the gang machinery itself costs (pub/sub wake-up,
  polls, reservation bookkeeping), without the API server.

``release_cpu_ms`` is the CPU time each process used during the release (Linux /proc):
everything shares this machine's cores, so it shows where the time goes when they are saturated.

Prints one JSON object. Usage:
python -m bench.bench_gang [--sizes 8,64,256] [--repeat 3] [--kube-transport aiohttp|httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.serving.embedded_redis import EmbeddedRedis, free_port
from devstack import http_client
from devstack.proc import cpu_seconds, wait_http
from extenders.kube.config import build_http_client

REPO = Path(__file__).resolve().parents[1]
GPU = "example.com/gpu"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_MIN = "scheduling.x-k8s.io/min-available"
GPUS_PER_NODE = 8


def _node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110", GPU: str(GPUS_PER_NODE)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, namespace: str, gang: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {GANG_LABEL: gang},
            "annotations": {GANG_MIN: str(size)},
        },
        "spec": {
            "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m", GPU: "1"}}}]
        },
    }


async def post_json(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One HTTP/1.1 POST on its own connection, as each kube-scheduler binding goroutine makes.

    Plain asyncio streams: a client pool juggling hundreds of in-flight requests would measure
    itself, not the extender.
    """
    host, _, port = url.removeprefix("http://").partition(":")
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()
        status = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        data = await reader.readexactly(length) if length else await reader.read()
    finally:
        writer.close()
    if b" 200 " not in status:
        raise RuntimeError(f"POST {url}{path}: {status!r} {data[:200]!r}")
    answer: dict[str, Any] = json.loads(data)
    return answer


class Bench:
    def __init__(self, replicas: int, log_dir: Path, kube_transport: str = "aiohttp") -> None:
        self.redis = EmbeddedRedis().start()
        self.token = secrets.token_hex(8)
        self.procs: list[subprocess.Popen[bytes]] = []
        kube_port = free_port()
        self.kube_url = f"http://127.0.0.1:{kube_port}"
        self._spawn(
            [sys.executable, "-m", "tests.fake_kube", "--port", str(kube_port), "--token", self.token],
            {},
            log_dir / "fake-kube.log",
        )
        wait_http(f"{self.kube_url}/healthz", self.procs[-1])
        self.api = http_client.client(
            base_url=self.kube_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )
        self.urls: list[str] = []
        prefix = f"bench{secrets.token_hex(3)}"
        for i in range(replicas):
            port = free_port()
            env = {
                "EXTENDER_REDIS_URL": self.redis.url,
                "EXTENDER_REDIS_PREFIX": prefix,
                "EXTENDER_REPLICA_ID": f"r{i + 1}",
                "EXTENDER_KUBE_MODE": "on",
                "EXTENDER_KUBE_URL": self.kube_url,
                "EXTENDER_KUBE_TOKEN": self.token,
                "EXTENDER_KUBE_TRANSPORT": kube_transport,
                "EXTENDER_GANG_WINDOW_SECONDS": "120",
                "EXTENDER_LOG_LEVEL": "warning",
            }
            cmd = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port)]
            self._spawn(cmd, env, log_dir / f"replica-{i + 1}.log")
            url = f"http://127.0.0.1:{port}"
            wait_http(f"{url}/readyz", self.procs[-1], 60)
            self.urls.append(url)
        self.nodes = 0
        self.kube_transport = kube_transport

    def _cpu(self) -> dict[str, float | None]:
        pids = {"api_server": self.procs[0].pid, "redis": self.redis.pid}
        pids.update({f"replica-{i + 1}": p.pid for i, p in enumerate(self.procs[1:])})
        return {name: cpu_seconds(pid) for name, pid in pids.items()} | {"bench": time.process_time()}

    def _spawn(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        out = log.open("wb")
        full = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.procs.append(subprocess.Popen(cmd, cwd=REPO, env=full, stdout=out, stderr=subprocess.STDOUT))

    def close(self) -> None:
        self.api.close()
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.redis.stop()

    def _post(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        resp = self.api.post(path, json=obj)
        resp.raise_for_status()
        body: dict[str, Any] = resp.json()
        return body

    def add_nodes(self, count: int) -> list[str]:
        names = [f"node-{self.nodes + i}" for i in range(count)]
        for name in names:
            self._post("/api/v1/nodes", _node(name))
        self.nodes += count
        return names

    async def run_once(self, size: int, run: int) -> dict[str, Any]:
        namespace, gang = f"bench-{size}-{run}", "job"
        nodes = self.add_nodes(max(1, -(-size // GPUS_PER_NODE)))
        pods = [
            self._post(f"/api/v1/namespaces/{namespace}/pods", _pod(f"w-{i}", namespace, gang, size))
            for i in range(size)
        ]
        async with httpx.AsyncClient(timeout=30) as http:
            await self._await_members(http, namespace, gang, size)

            async def bind(i: int) -> str:
                meta = pods[i]["metadata"]
                body = {
                    "PodName": meta["name"],
                    "PodNamespace": namespace,
                    "PodUID": meta["uid"],
                    "Node": nodes[i // GPUS_PER_NODE],
                }
                error: str = (await post_json(self.urls[i % len(self.urls)], "/bind", body))["Error"]
                return error

            started = time.perf_counter()
            held = [asyncio.create_task(bind(i)) for i in range(size - 1)]
            await self._await_arrived(http, namespace, gang, size - 1)
            arrival_phase = time.perf_counter() - started
            cpu0 = self._cpu()
            t0 = time.perf_counter()
            last = asyncio.create_task(bind(size - 1))
            errors = await asyncio.gather(*held, last)
            release = time.perf_counter() - t0
            cpu1 = self._cpu()
        failed = [e for e in errors if e]
        if failed:
            raise RuntimeError(f"gang of {size}: {len(failed)} binds failed, e.g. {failed[0]}")
        cpu = {
            k: (after - before) * 1000
            for k, before in cpu0.items()
            if before is not None and (after := cpu1[k]) is not None
        }
        return {"release_s": release, "arrival_phase_s": arrival_phase, "cpu_ms": cpu}

    async def api_only(self, size: int, run: int) -> float:
        """Seconds for the fake API server to take ``size`` Bindings straight from one client."""
        namespace = f"api-{size}-{run}"
        pods = [
            self._post(f"/api/v1/namespaces/{namespace}/pods", _pod(f"w-{i}", namespace, "none", 1))
            for i in range(size)
        ]
        http = build_http_client("on", url=self.kube_url, token=self.token, transport=self.kube_transport)
        assert http is not None
        async with http:
            slots = asyncio.Semaphore(8)

            async def one(pod: dict[str, Any]) -> None:
                meta = pod["metadata"]
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": meta["name"], "uid": meta["uid"]},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-0"},
                }
                async with slots:
                    resp = await http.post(f"/api/v1/namespaces/{namespace}/pods/{meta['name']}/binding", json=body)
                resp.raise_for_status()

            started = time.perf_counter()
            await asyncio.gather(*(one(p) for p in pods))
            return time.perf_counter() - started

    async def _await_members(self, http: httpx.AsyncClient, namespace: str, gang: str, size: int) -> None:
        deadline = time.monotonic() + 60
        for url in self.urls:
            while True:
                resp = await http.get(f"{url}/v1/gangs/{namespace}/{gang}")
                if resp.status_code == 200 and resp.json()["members"] >= size:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{url} never saw the {size} members of {namespace}/{gang}")
                await asyncio.sleep(0.05)

    async def _await_arrived(self, http: httpx.AsyncClient, namespace: str, gang: str, count: int) -> None:
        deadline = time.monotonic() + 120
        while True:
            resp = await http.get(f"{self.urls[0]}/v1/gangs/{namespace}/{gang}")
            if resp.status_code == 200 and len(resp.json()["arrived"]) >= count:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(resp.json().get('arrived', []))} of {count} arrived")
            await asyncio.sleep(0.01)


async def coordination(size: int, redis_url: str) -> float:
    """Seconds from the last arrival to every call answered, three services in-process, instant API."""
    import redis.asyncio as aredis

    from extenders.gang.bind import BindService
    from extenders.gang.config import GangConfig
    from extenders.gang.service import GangService
    from extenders.sync.store import Store
    from tests.gang_support import LocalRuntime, RecordingKube, gpu_node, member, seed

    prefix = f"coord{secrets.token_hex(3)}"
    kube = RecordingKube()
    clients = [aredis.Redis.from_url(redis_url) for _ in range(3)]
    services: list[GangService] = []
    binds: list[BindService] = []
    for i, client in enumerate(clients):
        runtime = LocalRuntime(Store(client, prefix), kube, f"r{i}")  # type: ignore[arg-type]
        service = GangService(client, runtime, GangConfig(window_seconds=120), replica_id=f"r{i}")
        bind_service = BindService(service)
        await service.start()
        await bind_service.start()
        services.append(service)
        binds.append(bind_service)
    try:
        pods = [member(f"w-{i}", "job", size) for i in range(size)]
        for pod in pods:
            kube.add(pod)
        nodes = [gpu_node(f"n{j}", GPUS_PER_NODE) for j in range(-(-size // GPUS_PER_NODE))]
        await seed(services[0].runtime.store, nodes, pods)

        def bind(i: int) -> Any:
            meta = pods[i]["metadata"]
            return binds[i % 3].bind("default", meta["name"], meta["uid"], f"n{i // GPUS_PER_NODE}")

        held = [asyncio.create_task(bind(i)) for i in range(size - 1)]
        while True:
            status = await services[0].gang_status("default", "job")
            if status is not None and len(status["arrived"]) == size - 1:
                break
            await asyncio.sleep(0.005)
        started = time.perf_counter()
        errors = await asyncio.gather(bind(size - 1), *held)
        elapsed = time.perf_counter() - started
        if any(errors):
            raise RuntimeError(f"in-process gang of {size}: {next(e for e in errors if e)}")
        return elapsed
    finally:
        for service, bind_service, client in zip(services, binds, clients, strict=True):
            await bind_service.stop()
            await service.stop()
            await client.aclose()


def _ms(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values) * 1000, 1),
        "max": round(max(values) * 1000, 1),
        "runs": [round(v * 1000, 1) for v in values],
    }


def _cpu_medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    names = sorted(set.intersection(*(set(r["cpu_ms"]) for r in runs)))
    medians = {n: round(statistics.median(r["cpu_ms"][n] for r in runs), 1) for n in names}
    medians["total"] = round(statistics.median(sum(r["cpu_ms"][n] for n in names) for r in runs), 1)
    return medians


async def _main(sizes: list[int], repeat: int, replicas: int, kube_transport: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-gang-") as tmp:
        bench = Bench(replicas, Path(tmp), kube_transport)
        try:
            results = []
            for size in sizes:
                runs = [await bench.run_once(size, r) for r in range(repeat)]
                api = [await bench.api_only(size, r) for r in range(repeat)]
                coord = [await coordination(size, bench.redis.url) for _ in range(repeat)]
                results.append(
                    {
                        "gang_size": size,
                        "release_ms": _ms([r["release_s"] for r in runs]),
                        "release_cpu_ms": _cpu_medians(runs),
                        "api_only_ms": _ms(api),
                        "coordination_ms": _ms(coord),
                        "arrival_phase_s_median": round(statistics.median(r["arrival_phase_s"] for r in runs), 3),
                    }
                )
            return {
                "benchmark": "gang release: last member's bind call -> every member's call answered, bound",
                "replicas": replicas,
                "kube_transport": kube_transport,
                "cpus": os.cpu_count(),
                "results": results,
            }
        finally:
            bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--kube-transport", choices=["aiohttp", "httpx"], default="aiohttp")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(json.dumps(asyncio.run(_main(sizes, args.repeat, args.replicas, args.kube_transport)), indent=2))


if __name__ == "__main__":
    main()
