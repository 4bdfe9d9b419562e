"""What a replica new to a class pays on its first call: evaluating every candidate itself, or taking
what another replica computed from the equivalence cache's shared tier in Redis.

Writes a cluster into Redis through the ``Store``, starts replica A and warms ``--classes`` classes
on it (pods differing in their CPU request; ``--warm-calls`` filter+prioritize pairs each, random
candidates), waits until A has written its entries, then starts a fresh replica B twice, with the
shared tier on and then off. Each B sends one filter+prioritize pair per class (its first sighting
of every class) and the server-side times of those calls are reported; B's counters say how many
node verdicts came from Redis.

    python bench/bench_shared_cache.py [--nodes 1000] [--pods-per-node 3] [--candidates 420]
        [--classes 40] [--warm-calls 6]

Uses $REDIS_URL when set (its keys are removed afterwards), else a private redis-server.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_http_filter import (  # noqa: E402
    on_redis,
    post,
    stats,
    wait_generation,
    writer_store,
)
from bench.http_filter_cluster import incoming_pod, load_cluster, node_object, pod_specs  # noqa: E402
from devstack import http_client  # noqa: E402
from devstack.replica import ServerProcess  # noqa: E402

Json = dict[str, Any]


def class_pod(index: int) -> Json:
    """The benchmark's incoming pod with a CPU request of its own: one equivalence class per index."""
    pod = incoming_pod(False)
    pod["metadata"] = {**pod["metadata"], "name": f"incoming-{index}", "uid": f"uid-incoming-{index}"}
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + index}m"
    return pod


def replica(url: str, prefix: str, name: str, shared: bool) -> ServerProcess:
    env = {
        "EXTENDER_REDIS_URL": url,
        "EXTENDER_REDIS_PREFIX": prefix,
        "EXTENDER_KUBE_MODE": "off",
        "EXTENDER_LOG_LEVEL": "warning",
        "EXTENDER_EQUIVALENCE_CACHE_SHARED": "true" if shared else "false",
    }
    server = ServerProcess(env, name)
    server.wait_ready(timeout=180.0)
    return server


def first_calls(server: ServerProcess, names: list[str], args: argparse.Namespace, generation: int) -> Json:
    """One filter+prioritize pair per class, each the replica's first sighting of that class."""
    rng = random.Random(11)
    filters: list[float] = []
    prioritizes: list[float] = []
    with http_client.client(base_url=server.url, timeout=30.0) as client:
        wait_generation(client, generation)
        post(client, "/filter", {"Pod": class_pod(10_000), "NodeNames": names[:10]})  # connection and code warm
        for index in range(args.classes):
            candidates = rng.sample(names, args.candidates)
            pod = class_pod(index)
            answer, filter_ms, _ = post(client, "/filter", {"Pod": pod, "NodeNames": candidates})
            _, prioritize_ms, _ = post(client, "/prioritize", {"Pod": pod, "NodeNames": answer["NodeNames"]})
            filters.append(filter_ms)
            prioritizes.append(prioritize_ms)
        counters = client.get("/v1/cache/stats").json()
    return {
        "server_ms": {"filter": stats(filters), "prioritize": stats(prioritizes)},
        "filter_nodes_shared": counters["verbs"]["filter"]["nodes_shared"],
        "filter_nodes_computed": counters["verbs"]["filter"]["nodes_computed"],
        "prioritize_nodes_shared": counters["verbs"]["prioritize"]["nodes_shared"],
        "prioritize_nodes_computed": counters["verbs"]["prioritize"]["nodes_computed"],
        "fetches": counters["shared"].get("fetches", 0),
    }


async def run(url: str, args: argparse.Namespace) -> Json:
    rng = random.Random(1)
    nodes = [node_object(rng, i) for i in range(args.nodes)]
    names = [n["metadata"]["name"] for n in nodes]
    prefix = f"benchshared{uuid.uuid4().hex[:6]}"
    servers: list[ServerProcess] = []
    async with writer_store(url, prefix, "bench-shared-writer#0") as (store, epoch):
        try:
            specs = pod_specs(rng, args.nodes, args.pods_per_node)
            generation = await load_cluster(store, epoch, nodes, specs, [incoming_pod(False)])
            warm = replica(url, prefix, "bench-shared-a", shared=True)
            servers.append(warm)
            written = warm_classes(warm, names, args, generation)
            results: Json = {}
            for shared in (True, False):
                server = replica(url, prefix, f"bench-shared-b-{'on' if shared else 'off'}", shared=shared)
                servers.append(server)
                if shared:  # the list of classes in Redis is read once a second
                    time.sleep(1.5)
                results["shared_on" if shared else "shared_off"] = first_calls(server, names, args, generation)
                server.stop()
        finally:
            for server in servers:
                server.stop()
                server.log_path.unlink(missing_ok=True)
    return {
        "benchmark": "shared_cache_first_sighting",
        "nodes": args.nodes,
        "pods": args.nodes * args.pods_per_node,
        "candidates": args.candidates,
        "classes": args.classes,
        "warm_calls_per_class_on_replica_a": args.warm_calls,
        "entries_written_by_a": written,
        "replica_b_first_calls": results,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def warm_classes(server: ServerProcess, names: list[str], args: argparse.Namespace, generation: int) -> int:
    """Replica A's calls for every class; returns how many entries it wrote once its writes settled."""
    rng = random.Random(5)
    with http_client.client(base_url=server.url, timeout=30.0) as client:
        wait_generation(client, generation)
        for index in range(args.classes):
            for _ in range(args.warm_calls):
                body = {"Pod": class_pod(index), "NodeNames": rng.sample(names, args.candidates)}
                answer, _, _ = post(client, "/filter", body)
                post(client, "/prioritize", {"Pod": body["Pod"], "NodeNames": answer["NodeNames"]})
        written, deadline = -1, time.monotonic() + 30
        while True:  # until the writes have settled (they go out in batches behind the answers)
            time.sleep(0.3)
            now: int = client.get("/v1/cache/stats").json()["shared"]["written"]
            if now == written and now > 0:
                return now
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica A's writes to the shared tier did not settle ({now} entries)")
            written = now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=420)
    parser.add_argument("--classes", type=int, default=40)
    parser.add_argument("--warm-calls", type=int, default=6, help="filter+prioritize pairs per class on replica A")
    args = parser.parse_args()
    if not 0 < args.candidates <= args.nodes:
        parser.error("--candidates must be between 1 and --nodes")
    print(orjson.dumps(on_redis(run, args), option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
