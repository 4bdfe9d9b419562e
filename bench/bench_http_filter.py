"""Filter and prioritize latency measured at a real server (``python -m app``), as kube-scheduler sees it.

Writes a 5000-node, 100k-pod cluster into Redis through the ``Store`` (the watcher's path),
starts one replica with the Kubernetes watch off against it, waits for /readyz, warms up,
then sends filter and prioritize calls in the nodeCacheCapable form (``NodeNames``, 500
random candidates per pair). Server-side time comes from the ``server-timing: app;dur=<ms>``
header the app adds (body parse to first response byte); the client round trip is timed too.

Two scenarios on the same replica: ``plain`` (no inter-pod terms anywhere), then
``inter_pod_affinity``: 5% of the existing pods are rewritten with a required anti-affinity
term (the replica catches up from Redis) and the incoming pod carries one as well, like
``bench_filter --affinity``. Every pair sends another pod of one ReplicaSet (its own name, uid,
resourceVersion and token volume, as kube-scheduler sends them), all of one class, so with the
equivalence cache on (the default; ``--equivalence-cache off``) filter reuses node-local verdicts
after the first calls. ``--pod-stream distinct`` gives each pod another CPU request instead, so that no
two pods share a class or a shape: what pods of many different workloads cost.

    python bench/bench_http_filter.py [--nodes 5000] [--pods-per-node 20] [--candidates 500]
        [--iterations 300] [--warmup 30] [--prioritize-on candidates|passing] [--gap-ms 0] [--equivalence-cache on|off]
        [--pod-stream workload|distinct] [--shared on|off] [--compare OTHER_TREE] [--null-extender]

``--null-extender`` also sends every pair to ``devstack.null_extender`` (an extender that decides
nothing, served by uvicorn as ours is): the protocol's own cost for the same requests, beside ours.

Uses $REDIS_URL when set (its keys are removed afterwards), else a private redis-server.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis.asyncio as aredis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.serving.embedded_redis import EmbeddedRedis  # noqa: E402
from bench.http_filter_cluster import (  # noqa: E402
    Json,
    add_affinity,
    delete_prefix,
    load_cluster,
    node_object,
    pod_specs,
    scenario_pods,
)
from devstack import http_client  # noqa: E402
from devstack.null_extender import NullExtenderProcess  # noqa: E402
from devstack.proc import cpu_seconds, resident_mb  # noqa: E402
from devstack.replica import ServerProcess  # noqa: E402
from extenders.sync.redis_connect import PoolOptions, RedisPool, RedisTarget  # noqa: E402
from extenders.sync.store import Store  # noqa: E402

TARGET_P99_MS = 15.0


def wait_generation(client: httpx.Client, generation: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get("/v1/nodes").json()["generation"] >= generation:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the replica did not reach generation {generation}")


# ------------------------------------------------------------------ measuring
def server_ms(response: httpx.Response) -> float:
    """``app;dur=<ms>`` from the server-timing header."""
    for part in response.headers["server-timing"].split(";"):
        if part.strip().startswith("dur="):
            return float(part.strip()[4:])
    raise ValueError(f"no dur in server-timing: {response.headers['server-timing']!r}")


def post(client: httpx.Client, path: str, body: Json) -> tuple[Any, float, float]:
    """(answer, server ms, client round-trip ms); the body is encoded before the clock starts."""
    content = orjson.dumps(body)
    start = time.perf_counter()
    response = client.post(path, content=content, headers={"content-type": "application/json"})
    took = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return orjson.loads(response.content), server_ms(response), took


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": pct(0.5), "p99": pct(0.99), "mean": round(statistics.fmean(ordered), 3)}


def run_scenario(
    clients: list[httpx.Client],
    pids: list[int],
    names: list[str],
    incoming: list[Json],
    args: argparse.Namespace,
    seed: int,
    compared: int = 1,
) -> list[dict[str, Any]]:
    """One result per server (``pids``: theirs, for the CPU they use). Each gets the same pairs, in
    alternating order, so the VM's drift (15-30% within minutes here) falls on all alike. The answers
    of the first ``compared`` servers must agree (the null extender's, last, cannot)."""
    rng = random.Random(seed)
    cpu_before: list[float] = []
    samples: list[dict[str, list[float]]] = [
        {k: [] for k in ("filter", "prioritize", "filter_prioritize", "rt_filter", "rt_prioritize", "rt_pair")}
        for _ in clients
    ]
    passing_total = prioritized_total = differ = 0
    for iteration in range(args.warmup + args.iterations):
        if iteration == args.warmup:
            cpu_before = [cpu_seconds(pid) or 0.0 for pid in pids]
        candidates = rng.sample(names, args.candidates)
        pod = incoming[iteration]
        order = list(range(len(clients))) if iteration % 2 == 0 else list(reversed(range(len(clients))))
        answers: dict[int, tuple[Any, Any]] = {}
        for at in order:
            client = clients[at]
            answer, f_server, f_client = post(client, "/filter", {"Pod": pod, "NodeNames": candidates})
            if answer["Error"]:
                raise RuntimeError(f"filter answered an error: {answer['Error']}")
            passing: list[str] = answer["NodeNames"]
            hosts = candidates if args.prioritize_on == "candidates" else passing
            if args.gap_ms:
                time.sleep(args.gap_ms / 1000)
            scores, p_server, p_client = post(client, "/prioritize", {"Pod": pod, "NodeNames": hosts})
            if len(scores) != len(hosts):
                raise RuntimeError(f"prioritize scored {len(scores)} of {len(hosts)} hosts")
            answers[at] = (answer, scores)
            if iteration < args.warmup:
                continue
            if at == 0:
                passing_total += len(passing)
                prioritized_total += len(hosts)
            for key, value in (
                ("filter", f_server),
                ("prioritize", p_server),
                ("filter_prioritize", f_server + p_server),
                ("rt_filter", f_client),
                ("rt_prioritize", p_client),
                ("rt_pair", f_client + p_client),
            ):
                samples[at][key].append(value)
        differ += any(answers[at] != answers[0] for at in answers if at < compared)
    cpu_used = [(cpu_seconds(pid) or 0.0) - before for pid, before in zip(pids, cpu_before, strict=True)]
    results = [
        {
            "mean_passing": round(passing_total / args.iterations, 1),
            "mean_prioritized": round(prioritized_total / args.iterations, 1),
            "server_ms": {k: stats(mine[k]) for k in ("filter", "prioritize", "filter_prioritize")},
            "client_round_trip_ms": {
                "filter": stats(mine["rt_filter"]),
                "prioritize": stats(mine["rt_prioritize"]),
                "filter_prioritize": stats(mine["rt_pair"]),
            },
            # All the replica's CPU while the pairs ran (its idle work included), per pair.
            "replica_cpu_ms_per_pair": round(1000 * used / args.iterations, 3),
        }
        for mine, used in zip(samples, cpu_used, strict=True)
    ]
    if compared > 1:
        results[0]["pairs_answered_differently_by_the_other_tree"] = differ
    return results


def null_figures(plain: Json, plain_null: Json, affinity: Json, affinity_null: Json) -> Json:
    """The null extender's figures, and ours over its (server-side, filter and prioritize) per scenario."""

    def over(ours: Json, null: Json) -> Json:
        return {
            verb: {q: round(ours["server_ms"][verb][q] / null["server_ms"][verb][q], 2) for q in ("p50", "p99")}
            for verb in ("filter", "prioritize")
        }

    return {
        "plain": plain_null,
        "inter_pod_affinity": affinity_null,
        "ours_over_null": {"plain": over(plain, plain_null), "inter_pod_affinity": over(affinity, affinity_null)},
    }


@asynccontextmanager
async def writer_store(url: str, prefix: str, holder: str) -> AsyncIterator[tuple[Store, int]]:
    """A Store on a fresh prefix and the writer lease's epoch (the benchmark writes what a leader
    would); the prefix's keys are removed afterwards."""
    # Through the replicas' own connection factory: a plain client would leave the prefix without the
    # server marker, and the replica's first connection would start a new store history (fencing us).
    pool = RedisPool(RedisTarget(url=url), PoolOptions(timeout=5.0, history_prefix=prefix))
    redis_client = aredis.Redis(connection_pool=pool.pool)
    store = Store(redis_client, prefix)
    try:
        lease = (await store.acquire_lease(holder, 3600)).lease
        if lease is None:
            raise RuntimeError("could not take the writer lease on a fresh prefix")
        try:
            yield store, lease.epoch
        finally:
            await store.release_lease(lease)
            await delete_prefix(redis_client, prefix)
    finally:
        await redis_client.aclose()
        await pool.aclose()  # a pool passed in explicitly is not closed by aclose()


async def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(1)
    nodes = [node_object(rng, i) for i in range(args.nodes)]
    pods = pod_specs(rng, args.nodes, args.pods_per_node)
    names = [n["metadata"]["name"] for n in nodes]
    prefix = f"benchhttp{uuid.uuid4().hex[:6]}"
    async with writer_store(url, prefix, "bench-http-writer#0") as (store, epoch):
        replicas: list[ServerProcess] = []
        nothing: NullExtenderProcess | None = None
        try:
            started = time.perf_counter()
            count = args.warmup + args.iterations
            distinct = args.pod_stream == "distinct"
            plain_pods, affinity_pods = scenario_pods(False, count, distinct), scenario_pods(True, count, distinct)
            await load_cluster(store, epoch, nodes, pods, plain_pods)
            load_seconds = time.perf_counter() - started

            started = time.perf_counter()
            env = {
                "EXTENDER_REDIS_URL": url,
                "EXTENDER_REDIS_PREFIX": prefix,
                "EXTENDER_KUBE_MODE": "off",
                "EXTENDER_LOG_LEVEL": "warning",
                "EXTENDER_EQUIVALENCE_CACHE": "true" if args.equivalence_cache == "on" else "false",
                "EXTENDER_EQUIVALENCE_CACHE_SHARED": "true" if args.shared == "on" else "false",
            }
            replica = ServerProcess(env, "bench-http")
            replicas = [replica]
            if args.compare:
                replicas.append(ServerProcess(env, "bench-http-other", tree=Path(args.compare).resolve()))
            for each in replicas:
                each.wait_ready(timeout=180.0)  # a 100k-pod snapshot takes a while to load
            ready_seconds = time.perf_counter() - started
            rss_ready_mb = resident_mb(replica.proc.pid)
            urls = [each.url for each in replicas]
            pids = [each.proc.pid for each in replicas]
            if args.null_extender:
                nothing = NullExtenderProcess()
                urls.append(nothing.url)
                pids.append(nothing.proc.pid)
            clients = [http_client.client(base_url=url, timeout=30.0) for url in urls]
            try:
                plain, *plain_rest = run_scenario(
                    clients, pids, names, plain_pods, args, seed=2, compared=len(replicas)
                )
                generation, rewritten = await add_affinity(store, epoch, pods, affinity_pods)
                for client in clients[: len(replicas)]:
                    wait_generation(client, generation)
                affinity, *affinity_rest = run_scenario(
                    clients, pids, names, affinity_pods, args, seed=3, compared=len(replicas)
                )
                affinity["existing_pods_with_anti_affinity"] = rewritten
                rss_mb = resident_mb(replica.proc.pid)
            finally:
                for client in clients:
                    client.close()
                if nothing is not None:
                    nothing.stop()
        except BaseException:
            for each in replicas:
                print(f"{each.name} exit code: {each.proc.poll()}; log tail:\n{each.log()}", file=sys.stderr)
            raise
        finally:
            for each in replicas:
                each.stop()
                each.log_path.unlink(missing_ok=True)
    plain_ms = plain["server_ms"]
    pair_p99 = plain_ms["filter_prioritize"]["p99"]
    call_p99 = max(plain_ms["filter"]["p99"], plain_ms["prioritize"]["p99"])
    return {
        "benchmark": "http_filter_prioritize",
        "nodes": args.nodes,
        "pods": args.nodes * args.pods_per_node,
        "candidates": args.candidates,
        "form": "NodeNames (nodeCacheCapable)",
        "prioritize_on": args.prioritize_on,
        "gap_ms": args.gap_ms,
        "iterations": args.iterations,
        "warmup": args.warmup,
        "replicas": 1,
        "pod_stream": args.pod_stream,
        "equivalence_cache": args.equivalence_cache,
        "shared_tier": args.shared,
        "load_cluster_into_redis_seconds": round(load_seconds, 3),
        "replica_start_to_ready_seconds": round(ready_seconds, 3),
        "replica_rss_mb": {"when_ready": rss_ready_mb, "after_both_scenarios": rss_mb},
        "plain": plain,
        "inter_pod_affinity": affinity,
        "other_tree": (
            {"tree": args.compare, "plain": plain_rest[0], "inter_pod_affinity": affinity_rest[0]}
            if args.compare
            else None
        ),
        "null_extender": null_figures(plain, plain_rest[-1], affinity, affinity_rest[-1]) if nothing else None,
        "target": {
            "what": "plain scenario, server-side p99 under target_ms: each call, and filter+prioritize summed",
            "target_ms": TARGET_P99_MS,
            "filter_p99_ms": plain_ms["filter"]["p99"],
            "prioritize_p99_ms": plain_ms["prioritize"]["p99"],
            "filter_prioritize_p99_ms": pair_p99,
            "met_per_call": call_p99 < TARGET_P99_MS,
            "met_pair": pair_p99 < TARGET_P99_MS,
        },
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--iterations", type=int, default=300, help="measured filter+prioritize pairs per scenario")
    parser.add_argument("--warmup", type=int, default=30, help="pairs sent first and not measured")
    parser.add_argument(
        "--prioritize-on",
        choices=("candidates", "passing"),
        default="candidates",
        help="prioritize every candidate (default) or only those filter passed, as kube-scheduler does",
    )
    parser.add_argument(
        "--gap-ms",
        type=float,
        default=0.0,
        help="pause between filter's answer and the prioritize call (kube-scheduler runs its own score "
        "plug-ins there; default 0: at once)",
    )
    parser.add_argument(
        "--equivalence-cache", choices=("on", "off"), default="on", help="the replica's equivalence cache (filter)"
    )
    parser.add_argument(
        "--pod-stream",
        choices=("workload", "distinct"),
        default="workload",
        help="workload (default): every pair schedules another pod of one ReplicaSet; distinct: every pod asks "
        "for another CPU request, so no two share a class or a shape",
    )
    parser.add_argument(
        "--shared", choices=("on", "off"), default="off", help="the equivalence cache's shared tier in Redis"
    )
    parser.add_argument(
        "--compare",
        metavar="OTHER_TREE",
        help="also run a replica of another checkout (a git worktree) on the same data, the same calls "
        "alternating between the two; its figures go under other_tree",
    )
    parser.add_argument(
        "--null-extender",
        action="store_true",
        help="also send every pair to an extender that decides nothing (devstack.null_extender); its figures, "
        "and ours over its, go under null_extender",
    )
    args = parser.parse_args()
    if not 0 < args.candidates <= args.nodes:
        parser.error("--candidates must be between 1 and --nodes")
    print(orjson.dumps(on_redis(run, args), option=orjson.OPT_INDENT_2).decode())
    return 0


def on_redis(run: Callable[[str, argparse.Namespace], Coroutine[Any, Any, Json]], args: argparse.Namespace) -> Json:
    """``run`` against $REDIS_URL when set, else a private redis-server; the result says which."""
    url = os.environ.get("REDIS_URL")
    if url:
        result = asyncio.run(run(url, args))
        result["redis"] = "REDIS_URL"
    else:
        with EmbeddedRedis() as server:
            result = asyncio.run(run(server.url, args))
        result["redis"] = "embedded redis-server"
    return result


if __name__ == "__main__":
    sys.exit(main())
