"""Scheduling throughput through the real kube-scheduler, without and with the extender, in one run.

Starts etcd, kube-apiserver (binaries from ``KUBE_BIN_DIR`` or ``PATH``), a private redis-server
and the extender's replicas behind a loopback balancer; registers ``--nodes`` Ready nodes spread
over ``--zones`` zones. Each phase creates ``--pods`` pending pods first (Deployment-like: ``--apps``
apps with a ReplicaSet owner; a fifth of the apps with required anti-affinity on the hostname,
another fifth with a zone topology spread constraint), then starts a kube-scheduler whose profile
they name and times until the API shows every pod bound. The plain phase's scheduler has no
extender; the extender phase's scheduler calls filter, prioritize and bind through the balancer.

Prints one JSON object. Usage:
python -m bench.bench_e2e_throughput [--nodes 1000] [--pods 3000] [--apps 20] [--replicas 2]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.embedded_redis import EmbeddedRedis
from devstack.controlplane import ControlPlane, KubeScheduler, extender_entries, running_control_plane
from devstack.kube import Kube, resources, wait_for
from devstack.stack import Stack

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
POD_CPU = "100m"
POD_MEMORY = "128Mi"


def app_kind(index: int) -> str:
    """Which constraint app ``index`` carries: a fifth anti-affinity, a fifth spread, the rest none."""
    return ("anti-affinity", "spread", "plain", "plain", "plain")[index % 5]


def pod_bodies(kube: Kube, scheduler: str, pods: int, apps: int) -> list[dict[str, Any]]:
    owners = [str(uuid.uuid4()) for _ in range(apps)]
    bodies = []
    for i in range(pods):
        app = i % apps
        labels = {"app": f"app-{app}"}
        spec: dict[str, Any] = {}
        kind = app_kind(app)
        if kind == "anti-affinity":
            term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        elif kind == "spread":
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": labels},
                }
            ]
        body = kube.pod_body(
            f"app-{app}-{i}",
            scheduler=scheduler,
            requests=resources(cpu=POD_CPU, memory=POD_MEMORY),
            labels=labels,
            **spec,
        )
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"app-{app}",
                "uid": owners[app],
                "controller": True,
            }
        ]
        bodies.append(body)
    return bodies


def create_all(kube: Kube, namespace: str, bodies: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda body: kube.create_pod(namespace, body), bodies))
    return time.perf_counter() - start


def bound_count(kube: Kube, namespace: str) -> int:
    return sum(1 for node in kube.placement(namespace).values() if node)


def run_phase(
    plane: ControlPlane,
    kube: Kube,
    workdir: Path,
    name: str,
    extenders: list[dict[str, Any]],
    pods: int,
    apps: int,
    qps: int,
) -> dict[str, Any]:
    """Pods first, then the scheduler; pods/s from its start to the last pod bound."""
    namespace = f"{name}-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    created_s = create_all(kube, namespace, pod_bodies(kube, name, pods, apps))
    start = time.perf_counter()
    scheduler = KubeScheduler(plane, name, extenders, workdir, verbosity=1, qps=qps)
    try:
        ready_s = time.perf_counter() - start
        wait_for(lambda: bound_count(kube, namespace) == pods, 1800, f"{pods} pods bound", interval=0.2)
        elapsed = time.perf_counter() - start
    finally:
        scheduler.stop()
    kube.delete_namespace_pods(namespace)
    return {
        "pods_per_second": round(pods / elapsed, 1),
        "seconds": round(elapsed, 2),
        "scheduler_start_seconds": round(ready_s, 2),
        "pod_create_seconds": round(created_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--node-cpu", default="32")
    parser.add_argument("--zones", type=int, default=10)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--apps", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--qps", type=int, default=2000, help="kube-scheduler's client QPS (burst twice that)")
    args = parser.parse_args()

    redis = EmbeddedRedis().start()
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        workdir = Path(tmp)
        with running_control_plane(workdir) as plane:
            kube = Kube(plane.client(timeout=60))
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(
                    pool.map(
                        lambda i: kube.create_node(
                            f"node-{i}", cpu=args.node_cpu, memory="128Gi", labels={ZONE: f"zone-{i % args.zones}"}
                        ),
                        range(args.nodes),
                    )
                )
            nodes_s = time.perf_counter() - started
            plain = run_phase(plane, kube, workdir, "plain", [], args.pods, args.apps, args.qps)

            stack = Stack(plane, redis.url, workdir, replicas=args.replicas, scheduler_verbosity=1)
            try:
                assert stack.scheduler is not None and stack.balancer is not None
                stack.scheduler.stop()  # the phase starts its own once the pods exist
                last = f"node-{args.nodes - 1}"

                def synced() -> bool:
                    return all(
                        httpx.get(f"{r.url}/v1/nodes/{last}", timeout=5).status_code == 200 for r in stack.replicas
                    )

                wait_for(synced, 120, "the replicas' snapshots have every node")
                entries = extender_entries(stack.balancer.url)
                extended = run_phase(plane, kube, workdir, stack.name, entries, args.pods, args.apps, args.qps)
                calls = {verb: stack.requests(verb) for verb in ("filter", "prioritize", "bind")}
                server_ms = {
                    verb: round(1000 * stack.server_seconds(verb) / count, 2) for verb, count in calls.items() if count
                }
            finally:
                stack.stop()
                redis.stop()

    mix = {
        kind: sum(1 for a in range(args.apps) if app_kind(a) == kind) for kind in ("anti-affinity", "spread", "plain")
    }
    print(
        json.dumps(
            {
                "benchmark": "e2e_throughput",
                "nodes": args.nodes,
                "node_cpu": args.node_cpu,
                "zones": args.zones,
                "pods": args.pods,
                "apps": args.apps,
                "pod_mix": {
                    "requests": {"cpu": POD_CPU, "memory": POD_MEMORY},
                    "apps_by_constraint": mix,
                    "anti_affinity": f"required, {HOST}",
                    "spread": f"maxSkew 1 on {ZONE}, DoNotSchedule",
                },
                "layout": {
                    "extender_replicas": args.replicas,
                    "balancer": "round-robin over the replicas (every verb)",
                    "entries": "filter+prioritize (nodeCacheCapable, weight 1), bind",
                    "scheduler_qps": args.qps,
                },
                "node_create_seconds": round(nodes_s, 2),
                "without_extender": plain,
                "with_extender": extended,
                "extender_calls": calls,
                # Mean server-side time per call, beside kube-scheduler's whole cycle per pod (1000 / pods/s).
                "extender_server_ms_mean": server_ms,
                "cycle_ms_with_extender": round(1000 / extended["pods_per_second"], 2),
                "cycle_ms_without_extender": round(1000 / plain["pods_per_second"], 2),
                "ratio": round(extended["pods_per_second"] / plain["pods_per_second"], 3),
                "python": sys.version.split()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
