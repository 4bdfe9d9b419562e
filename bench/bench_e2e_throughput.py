"""Scheduling throughput through the real kube-scheduler, without and with the extender, in one run.

Starts etcd, kube-apiserver (binaries from ``KUBE_BIN_DIR`` or ``PATH``), a private redis-server
and the extender's replicas behind a loopback balancer; registers ``--nodes`` Ready nodes spread
over ``--zones`` zones. Each phase creates ``--pods`` pending pods first (Deployment-like: ``--apps``
apps with a ReplicaSet owner; a fifth of the apps with required anti-affinity on the hostname,
another fifth with a zone topology spread constraint), then starts a kube-scheduler whose profile
they name and times until a watch on the namespace has seen every pod bound (a watch, not
repeated lists: listing 3000 pods several times a second would take the CPU being measured). The
plain phase's scheduler has no extender; the extender phase's scheduler calls filter and
prioritize on one replica and bind on another (``--layout direct``, as a Service with a
kernel-level balancer would spread kube-scheduler's connections), or every verb through a
loopback TCP balancer running in this process (``--layout balancer``). A third phase (skip it with
``--no-null-extender``) registers for filter and prioritize an extender that decides nothing
(``devstack.null_extender``: every candidate passes, every score is 0; kube-scheduler binds): what
the extender calls cost kube-scheduler by themselves on this machine.

Prints one JSON object. Usage:
python -m bench.bench_e2e_throughput [--nodes 1000] [--pods 3000] [--apps 20] [--replicas 2] [--layout direct]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.serving.embedded_redis import EmbeddedRedis, die_with_parent, free_port, stop_process
from devstack.controlplane import ControlPlane, KubeScheduler, extender_entries, running_control_plane
from devstack.kube import Kube, resources, wait_for
from devstack.proc import cpu_seconds
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


class BoundWatch:
    """Counts the namespace's pods that have a node, from one watch (started before the scheduler)."""

    def __init__(self, plane: ControlPlane, namespace: str, expected: int) -> None:
        self.expected = expected
        self.bound: set[str] = set()
        self.done = threading.Event()
        self._client = plane.client(timeout=None)  # type: ignore[arg-type]
        listing = self._client.get(f"/api/v1/namespaces/{namespace}/pods", params={"limit": "1"})
        listing.raise_for_status()
        version = listing.json()["metadata"]["resourceVersion"]
        self._url = f"/api/v1/namespaces/{namespace}/pods"
        self._params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "false"}
        self._thread = threading.Thread(target=self._run, name="bound-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._client.stream("GET", self._url, params=self._params) as stream:
            for line in stream.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                    self.bound.add(obj["metadata"]["name"])
                    if len(self.bound) >= self.expected:
                        self.done.set()
                        return

    def wait(self, timeout: float) -> None:
        if not self.done.wait(timeout):
            raise TimeoutError(f"{len(self.bound)} of {self.expected} pods bound after {timeout}s")

    def close(self) -> None:
        self._client.close()


class NullExtender:
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
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def entries(self) -> list[dict[str, Any]]:
        fast = {"urlPrefix": self.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1}
        return [{**fast, "nodeCacheCapable": True, "httpTimeout": "5s"}]

    def stop(self) -> None:
        stop_process(self.proc)


def run_phase(
    plane: ControlPlane,
    kube: Kube,
    workdir: Path,
    name: str,
    extenders: list[dict[str, Any]],
    pods: int,
    apps: int,
    qps: int,
    processes: dict[str, int],
) -> dict[str, Any]:
    """Pods first, then the scheduler; pods/s from its start to the last pod bound, and the CPU each of
    ``processes`` (name -> pid) and the scheduler used meanwhile, in ms per pod."""
    namespace = f"{name}-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    created_s = create_all(kube, namespace, pod_bodies(kube, name, pods, apps))
    watch = BoundWatch(plane, namespace, pods)
    before = {label: cpu_seconds(pid) or 0.0 for label, pid in processes.items()}
    start = time.perf_counter()
    scheduler = KubeScheduler(plane, name, extenders, workdir, verbosity=1, qps=qps)
    try:
        ready_s = time.perf_counter() - start
        watch.wait(1800)
        elapsed = time.perf_counter() - start
        used = {label: (cpu_seconds(pid) or 0.0) - before[label] for label, pid in processes.items()}
        used["kube-scheduler"] = cpu_seconds(scheduler.process.proc.pid) or 0.0
    finally:
        scheduler.stop()
        watch.close()
    kube.delete_namespace_pods(namespace)
    return {
        "pods_per_second": round(pods / elapsed, 1),
        "seconds": round(elapsed, 2),
        "scheduler_start_seconds": round(ready_s, 2),
        "pod_create_seconds": round(created_s, 2),
        "cpu_ms_per_pod": {label: round(1000 * seconds / pods, 2) for label, seconds in used.items()},
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
    parser.add_argument(
        "--layout",
        choices=("direct", "balancer"),
        default="direct",
        help="direct: filter+prioritize to the first replica, bind to the second; balancer: every verb through "
        "a loopback TCP balancer in this process",
    )
    parser.add_argument(
        "--null-extender",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time a phase with an extender that decides nothing (filter and prioritize only)",
    )
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
            processes = {p.name: p.proc.pid for p in plane.processes}
            processes["redis"] = redis.pid
            processes["this benchmark (watch)"] = os.getpid()
            plain = run_phase(plane, kube, workdir, "plain", [], args.pods, args.apps, args.qps, processes)
            null: dict[str, Any] | None = None
            if args.null_extender:
                nothing = NullExtender()
                try:
                    null = run_phase(
                        plane,
                        kube,
                        workdir,
                        "null",
                        nothing.entries(),
                        args.pods,
                        args.apps,
                        args.qps,
                        {**processes, "null extender": nothing.proc.pid},
                    )
                finally:
                    nothing.stop()

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
                if args.layout == "balancer":
                    entries = extender_entries(stack.balancer.url)
                else:
                    entries = extender_entries(stack.replicas[0].url)
                    entries[1]["urlPrefix"] = stack.replicas[-1].url
                role = {0: "replica 1 (filter, prioritize)", len(stack.replicas) - 1: "replica 2 (bind)"}
                labels: dict[str, str] = {}  # replica url -> its label
                for i, replica in enumerate(stack.replicas):
                    label = role.get(i, f"replica {i + 1}") if args.layout == "direct" else f"replica {i + 1}"
                    processes[label] = replica.proc.pid
                    labels[replica.url] = label
                extended = run_phase(
                    plane, kube, workdir, stack.name, entries, args.pods, args.apps, args.qps, processes
                )
                # The leader also runs the watch: its CPU per pod is not comparable with the others'.
                extended["watch_leader"] = next(
                    (
                        label
                        for url, label in labels.items()
                        if httpx.get(f"{url}/readyz", timeout=5).json().get("is_leader")
                    ),
                    None,
                )
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
                    "routing": (
                        "every verb round-robin over the replicas through a loopback TCP balancer"
                        if args.layout == "balancer"
                        else "filter+prioritize to the first replica, bind to the last"
                    ),
                    "entries": "filter+prioritize (nodeCacheCapable, weight 1), bind",
                    "scheduler_qps": args.qps,
                },
                "node_create_seconds": round(nodes_s, 2),
                "without_extender": plain,
                "with_null_extender": null,
                "with_extender": extended,
                "extender_calls": calls,
                # Mean server-side time per call, beside kube-scheduler's whole cycle per pod (1000 / pods/s).
                "extender_server_ms_mean": server_ms,
                "cycle_ms_with_extender": round(1000 / extended["pods_per_second"], 2),
                "cycle_ms_without_extender": round(1000 / plain["pods_per_second"], 2),
                "ratio": round(extended["pods_per_second"] / plain["pods_per_second"], 3),
                # What the extender protocol alone leaves of kube-scheduler's throughput here.
                "null_extender_ratio": round(null["pods_per_second"] / plain["pods_per_second"], 3) if null else None,
                "python": sys.version.split()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
