"""Gangs through the real kube-scheduler: from creating the pods to the last one bound.

Starts etcd, kube-apiserver and kube-scheduler (binaries from ``KUBE_BIN_DIR`` or ``PATH``),
a private redis-server and two replicas behind a loopback balancer, registered as the
README recommends. For each size, the same pods are created three times in one sitting: as one
gang (minimum = size), as one gang created behind the assembly gate (extenders.gang.gates), and
without gang labels; each run times the first create request until the API shows every pod
bound, then deletes the pods and waits until the extender's snapshot has let their capacity go.

Prints one JSON object. Usage:
python -m bench.bench_e2e_gang [--sizes 8,64,256] [--repeat 3] [--nodes 64] [--node-cpu 8] [--replicas 2]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from devstack import http_client
from devstack.controlplane import find_binaries
from devstack.kube import Kube, resources, wait_for
from devstack.releases import binary_version
from devstack.stack import Stack, running_stack
from extenders.gang.gates import ASSEMBLY_GATE

GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
GANG_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
POD_CPU = "500m"


KINDS = ("gang", "gated", "plain")


def run_once(kube: Kube, stack: Stack, size: int, kind: str) -> float:
    """Seconds from the first create to every pod bound; ``kind`` is one of ``KINDS``."""
    namespace = f"bench-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    labels = {"app": "plain"} if kind == "plain" else {GANG_NAME: "g", GANG_MIN: str(size)}
    gates: dict[str, Any] = {"schedulingGates": [{"name": ASSEMBLY_GATE}]} if kind == "gated" else {}
    bodies = [
        kube.pod_body(f"p-{i}", scheduler=stack.name, requests=resources(cpu=POD_CPU), labels=labels, **gates)
        for i in range(size)
    ]
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda body: kube.create_pod(namespace, body), bodies))

    def all_bound() -> bool:
        placed = kube.placement(namespace)
        return len(placed) == size and all(placed.values())

    wait_for(all_bound, 600, f"{size} pods bound", interval=0.02)
    elapsed = time.perf_counter() - start
    kube.delete_namespace_pods(namespace)

    def released() -> bool:
        url = stack.replicas[0].url
        names = [n["name"] for n in http_client.get(f"{url}/v1/nodes", timeout=10).json()["nodes"]]
        for name in names:
            pods = http_client.get(f"{url}/v1/nodes/{name}", timeout=10).json()["pods"]
            if any(p["namespace"] == namespace for p in pods):
                return False
        return True

    wait_for(lambda: not kube.pods(namespace), 120, "pods deleted")
    wait_for(released, 120, "the snapshot released the pods")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--node-cpu", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    capacity = args.nodes * args.node_cpu * 2  # pods of 500m
    if max(sizes) > capacity:
        parser.error(f"{max(sizes)} pods of {POD_CPU} do not fit on {args.nodes} nodes of {args.node_cpu} CPUs")
    results: list[dict[str, Any]] = []
    with running_stack(args.nodes, args.node_cpu, replicas=args.replicas) as (kube, stack):
        for size in sizes:
            runs = {kind: [run_once(kube, stack, size, kind) for _ in range(args.repeat)] for kind in KINDS}
            medians = {kind: statistics.median(times) for kind, times in runs.items()}
            results.append(
                {
                    "pods": size,
                    **{
                        f"{kind}_s": {"median": round(medians[kind], 3), "runs": [round(t, 3) for t in times]}
                        for kind, times in runs.items()
                    },
                    "gang_over_plain": round(medians["gang"] / medians["plain"], 2),
                    "gated_over_plain": round(medians["gated"] / medians["plain"], 2),
                }
            )
    binaries, _ = find_binaries()
    scheduler = binaries.get("kube-scheduler")
    print(
        json.dumps(
            {
                "kube_scheduler": (binary_version(scheduler) if scheduler else None) or "unknown",
                "nodes": args.nodes,
                "node_cpu": args.node_cpu,
                "pod_cpu": POD_CPU,
                "replicas": args.replicas,
                "repeat": args.repeat,
                "results": results,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
