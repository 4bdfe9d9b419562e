"""Time to recover from a cancelled gang, through the real kube-scheduler, on long-lived state.

Starts etcd, kube-apiserver and kube-scheduler (binaries from ``KUBE_BIN_DIR`` or ``PATH``), a
private redis-server and two replicas behind a loopback balancer. Every cycle runs on the same
Redis and replicas: gang A takes the whole cluster (one member of 3 CPUs per node of 4 CPUs), gang B
of the same shape is created behind it, then A is cancelled (its pods deleted) and the time until
every member of B is bound is measured; B is then deleted and the next cycle begins. Two ways A is
cancelled, alternating:

- ``assembling``: one member of A can go nowhere (a node selector no node matches), so the others
  are held at bind and A holds the assembling slot when it is cancelled;
- ``running``: A is complete (every member bound) when it is cancelled.

Also measured: how long after the cancellation ``/v1/gangs`` no longer knows A.

Prints one JSON object. Usage:
python -m bench.bench_gang_recovery [--cycles 20] [--nodes 4] [--replicas 2]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from typing import Any

from devstack import http_client
from devstack.kube import Kube, resources, wait_for
from devstack.stack import Stack, running_stack

GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
GANG_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
MODES = ("assembling", "running")


class Cycles:
    def __init__(self, kube: Kube, stack: Stack, nodes: int) -> None:
        self.kube = kube
        self.stack = stack
        self.nodes = nodes
        self.namespace = f"bench-{secrets.token_hex(3)}"
        kube.create_namespace(self.namespace)
        self.serial = 0

    def gang(self, name: str, stuck: bool) -> list[str]:
        names = [f"{name}-{i}" for i in range(self.nodes)]
        for i, pod in enumerate(names):
            spec: dict[str, Any] = {"nodeSelector": {"role": "nowhere"}} if stuck and i == self.nodes - 1 else {}
            body = self.kube.pod_body(
                pod,
                scheduler=self.stack.name,
                requests=resources(cpu="3"),
                labels={GANG_NAME: name, GANG_MIN: str(self.nodes), "gang": name},
                **spec,
            )
            self.kube.create_pod(self.namespace, body)
        return names

    def bound(self, names: list[str]) -> bool:
        placed = self.kube.placement(self.namespace, f"gang={names[0].rsplit('-', 1)[0]}")
        return all(placed.get(n) for n in names)

    def known(self, gang: str) -> bool:
        resp = http_client.get(f"{self.stack.replicas[0].url}/v1/gangs/{self.namespace}/{gang}", timeout=5)
        return resp.status_code == 200

    def held(self, gang: str, count: int) -> bool:
        resp = http_client.get(f"{self.stack.replicas[0].url}/v1/gangs/{self.namespace}/{gang}", timeout=5)
        return resp.status_code == 200 and len(resp.json().get("arrived") or []) == count

    def delete(self, gang: str) -> None:
        self.kube.delete_pods(self.namespace, f"gang={gang}")
        wait_for(lambda: not self.kube.pods(self.namespace, f"gang={gang}"), 60, f"gang {gang} deleted")

    def run(self, mode: str) -> tuple[float, float]:
        """One cycle: (seconds until B is bound, seconds until A is forgotten), both from A's cancellation."""
        self.serial += 1
        a, b = f"a{self.serial}", f"b{self.serial}"
        a_names = self.gang(a, stuck=mode == "assembling")
        if mode == "assembling":
            wait_for(lambda: self.held(a, self.nodes - 1), 60, f"{a} held at bind", interval=0.05)
        else:
            wait_for(lambda: self.bound(a_names), 60, f"{a} bound", interval=0.05)
        b_names = self.gang(b, stuck=False)
        time.sleep(1.0)  # B's members have been turned away and parked
        if self.bound(b_names):
            raise RuntimeError(f"{b} bound while {a} held the cluster")
        cancelled = time.perf_counter()
        self.kube.delete_pods(self.namespace, f"gang={a}")
        forgotten = None
        while not self.bound(b_names):
            if forgotten is None and not self.known(a):
                forgotten = time.perf_counter() - cancelled
            if time.perf_counter() - cancelled > 300:
                raise RuntimeError(f"{b} not bound 300 s after {a} was cancelled")
            time.sleep(0.02)
        recovered = time.perf_counter() - cancelled
        if forgotten is None:
            wait_for(lambda: not self.known(a), 60, f"{a} forgotten", interval=0.05)
            forgotten = time.perf_counter() - cancelled
        self.delete(b)
        return recovered, forgotten


def summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
        "runs": [round(v, 3) for v in values],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20, help="cycles per mode")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    recovered: dict[str, list[float]] = {m: [] for m in MODES}
    forgotten: dict[str, list[float]] = {m: [] for m in MODES}
    started = time.perf_counter()
    with running_stack(args.nodes, 4, "16Gi", replicas=args.replicas) as (kube, stack):
        cycles = Cycles(kube, stack, args.nodes)
        for _ in range(args.cycles):
            for mode in MODES:
                took, gone = cycles.run(mode)
                recovered[mode].append(took)
                forgotten[mode].append(gone)
    print(
        json.dumps(
            {
                "kube_scheduler": "v1.28.7 (real)",
                "nodes": args.nodes,
                "node_cpu": 4,
                "gang_size": args.nodes,
                "member_cpu": 3,
                "replicas": args.replicas,
                "cycles_per_mode": args.cycles,
                "next_gang_bound_after_cancel_s": {m: summary(v) for m, v in recovered.items()},
                "cancelled_gang_forgotten_after_s": {m: summary(v) for m, v in forgotten.items()},
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
