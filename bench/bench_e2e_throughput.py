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
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app.serving.embedded_redis import EmbeddedRedis
from bench.e2e_measures import VERBS, Profiler, idle_rates, means, round_of, targets_mean, targets_of
from bench.e2e_phases import Sitting, run_round
from bench.e2e_workload import HOST, POD_CPU, POD_MEMORY, ZONE, app_kind
from devstack.controlplane import running_control_plane
from devstack.kube import Kube


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
        "--watch-leader",
        choices=("bind", "filter", "any"),
        default="bind",
        help="direct layout: which replica holds the watch lease (bind: the replica bind goes to; any: whichever "
        "wins the start-up race)",
    )
    parser.add_argument(
        "--null-extender",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time a phase with an extender that decides nothing (filter and prioritize only)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="sample the replicas' stacks with py-spy during the extender phase; folded stacks go to this "
        "directory (summarise them with bench/profile_summary.py)",
    )
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="OTHER_TREE",
        help="after this tree's extender phase, run the same phase with replicas of another checkout (a git "
        "worktree) on the same control plane and Redis; its figures go under with_other_tree",
    )
    parser.add_argument(
        "--verbs",
        default=",".join(VERBS),
        help="the verbs registered for our replicas (comma-separated, of filter, prioritize, preempt, bind); "
        "without bind, kube-scheduler binds each pod itself, as in the other phases; none: no extender is "
        "registered and the replicas only follow the cluster (what their watches cost the API server)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="measure each process's CPU while nothing is scheduled, for SECONDS, once the nodes exist and again "
        "in each extender phase once its replicas are up (idle_cpu_ms_per_second): the background a phase's CPU "
        "per pod carries in proportion to its length",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of every phase (plain, null extender, ours, --compare's tree), every other one in reverse "
        "order; target_rounds gives the issue's ratios per round against that round's plain and null phases, "
        "targets_mean averages them, compare_rounds and compare_means summarise the extender phases",
    )
    args = parser.parse_args()
    if args.profile is not None and Profiler.spy() is None:
        parser.error("--profile needs py-spy, which the project does not install: pip install py-spy")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    if args.idle < 0:
        parser.error("--idle: SECONDS, 0 or more")
    if args.verbs != "none" and not set(args.verbs.split(",")) <= set(VERBS):
        parser.error(f"--verbs: none, or each of {', '.join(VERBS)}")

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
            idle = idle_rates(processes, args.idle) if args.idle else None
            try:
                sitting = Sitting(plane, kube, workdir, redis.url, args, processes)
                by_round = [run_round(sitting, index) for index in range(args.rounds)]
            finally:
                redis.stop()

    plain, null, extended = by_round[0]["plain"], by_round[0].get("null"), by_round[0]["this"]
    other = by_round[0].get("other")
    rounds = (
        [round_of(tree, phases[tree]) for phases in by_round for tree in phases if tree in ("this", "other")]
        if other is not None
        else []
    )
    nulls = [phases["null"]["pods_per_second"] for phases in by_round if "null" in phases]
    targets = [targets_of(phases) for phases in by_round]

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
                    "verbs": args.verbs,
                    "scheduler_qps": args.qps,
                },
                "node_create_seconds": round(nodes_s, 2),
                "idle_cpu_ms_per_second": idle,
                "without_extender": plain,
                "with_null_extender": null,
                "with_extender": extended,
                "with_other_tree": other,
                "compare_rounds": rounds or None,
                "compare_means": means(rounds, sum(nulls) / len(nulls) if nulls else None) if rounds else None,
                # The ratios, each round against its own plain and null phases, and their means.
                "target_rounds": targets,
                "targets_mean": targets_mean(targets),
                "cycle_ms_with_extender": round(1000 / extended["pods_per_second"], 2),
                "cycle_ms_without_extender": round(1000 / plain["pods_per_second"], 2),
                "ratio": round(extended["pods_per_second"] / plain["pods_per_second"], 3),
                # What the extender protocol alone leaves of kube-scheduler's throughput here.
                "null_extender_ratio": round(null["pods_per_second"] / plain["pods_per_second"], 3) if null else None,
                # The targets: ours over the null extender (pods/s), and the CPU comparisons.
                "ours_over_null": round(extended["pods_per_second"] / null["pods_per_second"], 3) if null else None,
                "other_tree_over_null": (
                    round(other["pods_per_second"] / null["pods_per_second"], 3) if null and other else None
                ),
                "python": sys.version.split()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
