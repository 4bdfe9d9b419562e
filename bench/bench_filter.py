"""Filter + prioritize latency on a large synthetic snapshot; prints one JSON object.

Default: 5000 nodes, 100k pods (20 per node), 500 candidate nodes per call, pods without
inter-pod terms. Usage: python -m bench.bench_filter [--nodes N] [--pods-per-node K]
[--candidates C] [--iterations I] [--affinity] [--churn]

``--churn`` gives every call a new Snapshot in which one node was rebuilt with one more pod
(as the replica's snapshot cache produces after a bind), so per-snapshot summaries are
derived incrementally rather than reused: the regime of a busy cluster.

``--spread default`` gives the incoming pod no topologySpreadConstraints and the snapshot one
Service per namespace and app (500), so PodTopologySpread scores it with kube-scheduler's system
defaults over its Service's selector; ``--spread none`` drops the constraints without Services (the
default selector is empty: the scorer skips the pod); ``--spread declared`` (default) keeps its
ScheduleAnyway zone constraint. With ``default`` or ``none`` the snapshot is sealed, as the replica
cache's snapshots are, so the default selector is remembered across calls.

``--cache on`` filters and prioritizes through the equivalence cache (pods of one class, so it warms up);
``--cache distinct`` through the cache with every pod of a class of its own (nothing to reuse:
the cache's pure overhead); ``--cache off`` (default) without it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from extenders import engine
from extenders.equivalence import EquivalenceCache
from extenders.model import NodeFacts, NodeInfo, PodInfo, ServiceInfo, Taint
from extenders.policy import default_policy
from extenders.snapshot import Snapshot

GI = 2**30


def _pod(rng: random.Random, name: str, node: str, affinity: bool) -> PodInfo:
    app = f"app-{rng.randrange(50)}"
    pod = PodInfo(
        namespace=f"ns-{rng.randrange(10)}",
        name=name,
        uid=f"uid-{name}",
        labels={"app": app, "tier": rng.choice(("web", "db"))},
        node_name=node,
        requests={"cpu": rng.choice((50, 100, 200)), "memory": rng.choice((64, 128, 256)) * 2**20},
        nonzero_cpu=100,
        nonzero_memory=200 * 2**20,
        images=[f"registry/{app}:1"],
    )
    if affinity and rng.random() < 0.05:
        pod.affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return pod


def build(nodes: int, pods_per_node: int, affinity: bool, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    snapshot = Snapshot()
    for i in range(nodes):
        name = f"node-{i}"
        facts = NodeFacts(
            name=name,
            labels={
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{i % 5}",
                "disk": rng.choice(("ssd", "hdd")),
            },
            taints=[Taint("dedicated", "gpu", "NoSchedule")] if i % 50 == 0 else [],
            conditions={"Ready": "True"},
            allocatable={"cpu": 64000, "memory": 256 * GI, "pods": 110, "ephemeral-storage": 100 * GI},
            images={f"registry/app-{j}:1": 100 * 2**20 for j in range(rng.randrange(10))},
        )
        pods = [_pod(rng, f"p-{i}-{k}", name, affinity) for k in range(pods_per_node)]
        snapshot.nodes[name] = NodeInfo.build(name, facts, pods)
    return snapshot


def incoming(affinity: bool) -> PodInfo:
    pod = PodInfo(
        namespace="ns-1",
        name="incoming",
        uid="uid-incoming",
        labels={"app": "app-7"},
        requests={"cpu": 500, "memory": GI},
        nonzero_cpu=500,
        nonzero_memory=GI,
        node_selector={"disk": "ssd"},
        tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        topology_spread=[
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "app-7"}},
            }
        ],
        images=["registry/app-7:1"],
    )
    if affinity:
        pod.affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "app-7"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return pod


def churned(snapshot: Snapshot, name: str, iteration: int, affinity: bool, rng: random.Random) -> Snapshot:
    """A new snapshot sharing every node but ``name``, which is rebuilt with one more pod."""
    old = snapshot.nodes[name]
    pods = [*old.pods.values(), _pod(rng, f"churn-{iteration}", name, affinity)]
    nodes = dict(snapshot.nodes)
    nodes[name] = NodeInfo.build(name, old.node, pods, old.generation + 1)
    return Snapshot(
        nodes=nodes,
        generation=snapshot.generation + 1,
        sealed=True,
        summary_seed=snapshot.seed(),
        node_changes=snapshot.changes_since_seed([name]),
        objects=snapshot.objects,
    )


def _services() -> dict[str, ServiceInfo]:
    """One Service per namespace and app of ``_pod``'s pods."""
    out: dict[str, ServiceInfo] = {}
    for ns in range(10):
        for app in range(50):
            service = ServiceInfo(f"ns-{ns}", f"app-{app}", {"app": f"app-{app}"})
            out[service.key] = service
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--affinity", action="store_true", help="give pods inter-pod anti-affinity terms")
    parser.add_argument("--churn", action="store_true", help="a new snapshot, one node changed, before every call")
    parser.add_argument("--cache", choices=("off", "on", "distinct"), default="off", help="the equivalence cache")
    parser.add_argument(
        "--spread", choices=("declared", "default", "none"), default="declared", help="the pod's spreading"
    )
    args = parser.parse_args()
    cache = EquivalenceCache() if args.cache != "off" else None
    snapshot = build(args.nodes, args.pods_per_node, args.affinity)
    policy = default_policy()
    pod = incoming(args.affinity)
    if args.spread != "declared":
        pod.topology_spread = []
        snapshot.sealed = True  # as the replica cache's snapshots are: the default selector is remembered
    if args.spread == "default":
        snapshot.objects = {**snapshot.objects, "services": _services()}
    rng = random.Random(2)
    names = sorted(snapshot.nodes)
    filter_ms: list[float] = []
    prioritize_ms: list[float] = []
    total_ms: list[float] = []
    passing = 0
    for iteration in range(args.iterations):
        if args.churn:
            snapshot = churned(snapshot, rng.choice(names), iteration, args.affinity, rng)
        candidates = rng.sample(names, args.candidates)
        if args.cache == "distinct":
            pod.labels = {**pod.labels, "serial": str(iteration)}
        start = time.perf_counter()
        memo = cache.memo(pod, "filter") if cache is not None else None
        result = engine.filter_nodes(policy, pod, snapshot, candidates, memo)
        middle = time.perf_counter()
        memo = cache.memo(pod, "prioritize") if cache is not None else None
        engine.prioritize_nodes(policy, pod, snapshot, result.passing, memo)
        end = time.perf_counter()
        filter_ms.append((middle - start) * 1000)
        prioritize_ms.append((end - middle) * 1000)
        total_ms.append((end - start) * 1000)
        passing += len(result.passing)

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    out: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.nodes * args.pods_per_node,
        "candidates": args.candidates,
        "affinity": args.affinity,
        "churn": args.churn,
        "cache": args.cache,
        "spread": args.spread,
        "iterations": args.iterations,
        "mean_passing": passing / args.iterations,
        "filter_ms": {"p50": pct(filter_ms, 0.5), "p99": pct(filter_ms, 0.99)},
        "prioritize_ms": {"p50": pct(prioritize_ms, 0.5), "p99": pct(prioritize_ms, 0.99)},
        "filter_prioritize_ms": {
            "p50": pct(total_ms, 0.5),
            "p99": pct(total_ms, 0.99),
            "mean": round(statistics.fmean(total_ms), 3),
        },
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
