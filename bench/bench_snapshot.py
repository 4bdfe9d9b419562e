"""Benchmark of the Redis snapshot: write a large cluster through the store, load it into a replica,
catch up after a few changes, and the cost of a refresh when nothing changed.

    python bench/bench_snapshot.py [--nodes 5000] [--pods 100000] [--steady 2000]

Uses $REDIS_URL when set, else starts a private redis-server. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.serving.embedded_redis import EmbeddedRedis
from extenders.sync.cache import SnapshotCache
from extenders.sync.convert import node_facts, pod_info
from extenders.sync.store import Op, Store

BATCH = 500


def node_object(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.UUID(int=i)),
            "resourceVersion": str(1000 + i),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "node.kubernetes.io/instance-type": "m5.4xlarge",
            },
        },
        "spec": {"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}] if i % 10 == 0 else []},
        "status": {
            "allocatable": {"cpu": "15890m", "memory": "63Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [{"type": t, "status": "False"} for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
            + [{"type": "Ready", "status": "True"}],
            "images": [{"names": [f"registry.example.com/app-{k}:v1"], "sizeBytes": 100_000_000 + k} for k in range(8)],
        },
    }


def pod_object(j: int, node: str) -> dict[str, Any]:
    app = f"app-{j % 200}"
    return {
        "metadata": {
            "name": f"{app}-{j:06d}",
            "namespace": f"team-{j % 20}",
            "uid": str(uuid.UUID(int=10**9 + j)),
            "labels": {"app": app, "pod-template-hash": "5d8f9c7b6", "tier": "backend"},
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": f"{app}-5d8f9c7b6", "uid": f"rs-{j % 200}", "controller": True}
            ],
        },
        "spec": {
            "nodeName": node,
            "priority": 0,
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example.com/{app}:v1",
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                    "ports": [{"containerPort": 8080}],
                }
            ],
            "tolerations": [
                {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
                for k in ("not-ready", "unreachable")
            ],
        },
        "status": {"phase": "Running", "startTime": "2024-05-01T10:00:05Z"},
    }


async def timed_refresh(cache: SnapshotCache) -> float:
    started = time.perf_counter()
    await cache.refresh()
    return time.perf_counter() - started


async def run(url: str, nodes: int, pods: int, steady: int) -> dict[str, Any]:
    client = aredis.Redis.from_url(url)
    store = Store(client, f"bench{uuid.uuid4().hex[:6]}")
    lease = (await store.acquire_lease("bench#0", 3600)).lease
    assert lease is not None
    epoch = lease.epoch

    node_names = [f"node-{i:05d}" for i in range(nodes)]
    ops: list[Op] = [Op.node(node_facts(node_object(i))) for i in range(nodes)]
    ops += [Op.pod(pod_info(pod_object(j, node_names[j % nodes]))) for j in range(pods)]
    record_bytes = sum(len(op.payload) for op in ops)

    started = time.perf_counter()
    for start in range(0, len(ops), BATCH):
        await store.apply(epoch, ops[start : start + BATCH])
    write_seconds = time.perf_counter() - started

    cache = SnapshotCache(store)
    full_load_seconds = await timed_refresh(cache)
    snap = cache.current
    assert len(snap.nodes) == nodes and sum(len(n.pods) for n in snap.nodes.values()) == pods

    # catch-up after changes: a new pod on 1 node, then on 100 distinct nodes (one round trip each)
    extra = 0

    async def change(count: int) -> float:
        nonlocal extra
        batch = []
        for k in range(count):
            batch.append(Op.pod(pod_info(pod_object(pods + extra, node_names[(k * 37) % nodes]))))
            extra += 1
        await store.apply(epoch, batch)
        return await timed_refresh(cache)

    catch_up_1 = statistics.median([await change(1) for _ in range(20)])
    catch_up_100 = statistics.median([await change(100) for _ in range(5)])

    for _ in range(50):  # warm up
        await cache.refresh()
    samples = [await timed_refresh(cache) for _ in range(steady)]
    samples.sort()

    info = await client.info("memory")
    await client.aclose()
    return {
        "benchmark": "snapshot",
        "nodes": nodes,
        "pods": pods,
        "stored_record_bytes": record_bytes,
        "redis_used_memory_bytes": int(info.get("used_memory", 0)),
        "write_full_cluster_seconds": round(write_seconds, 3),
        "write_ops_per_second": round(len(ops) / write_seconds),
        "replica_full_load_seconds": round(full_load_seconds, 3),
        "catch_up_after_1_node_change_ms": round(catch_up_1 * 1000, 3),
        "catch_up_after_100_node_changes_ms": round(catch_up_100 * 1000, 3),
        "steady_refresh_unchanged_us": {
            "mean": round(statistics.fmean(samples) * 1e6, 1),
            "p50": round(samples[len(samples) // 2] * 1e6, 1),
            "p99": round(samples[int(len(samples) * 0.99)] * 1e6, 1),
            "samples": len(samples),
            "round_trips_each": 1,
        },
        "python": sys.version.split()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--steady", type=int, default=2000, help="refreshes timed with nothing changed")
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL")
    if url:
        result = asyncio.run(run(url, args.nodes, args.pods, args.steady))
        result["redis"] = "REDIS_URL"
    else:
        with EmbeddedRedis() as server:
            result = asyncio.run(run(server.url, args.nodes, args.pods, args.steady))
        result["redis"] = "embedded redis-server"
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
