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
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.serving.embedded_redis import EmbeddedRedis
from bench.e2e_measures import (
    VERBS,
    BoundWatch,
    Profiler,
    api_requests,
    means,
    per_pod,
    registered,
    replica_counters,
    round_of,
)
from bench.e2e_workload import HOST, POD_CPU, POD_MEMORY, ZONE, app_kind, create_all, pod_bodies
from devstack.controlplane import ControlPlane, KubeScheduler, extender_entries, running_control_plane
from devstack.kube import Kube, wait_for
from devstack.null_extender import NullExtenderProcess
from devstack.proc import cpu_seconds
from devstack.stack import Stack


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
    profile: Profiler | None = None,
    replica_urls: list[str] = [],  # noqa: B006 - never mutated
) -> dict[str, Any]:
    """Pods first, then the scheduler; pods/s from its start to the last pod bound, and the CPU each of
    ``processes`` (name -> pid) and the scheduler used meanwhile, in ms per pod. ``profile``: sample the
    replicas' Python stacks for the phase's duration."""
    namespace = f"{name}-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    created_s = create_all(kube, namespace, pod_bodies(kube, name, pods, apps))
    watch = BoundWatch(plane, namespace, pods)
    before = {label: cpu_seconds(pid) or 0.0 for label, pid in processes.items()}
    requests_before = api_requests(plane)
    counters_before = replica_counters(replica_urls)
    if profile is not None:
        profile.start()
    start = time.perf_counter()
    scheduler = KubeScheduler(plane, name, extenders, workdir, verbosity=1, qps=qps)
    try:
        ready_s = time.perf_counter() - start
        watch.wait(1800)
        elapsed = time.perf_counter() - start
        used = {label: (cpu_seconds(pid) or 0.0) - before[label] for label, pid in processes.items()}
        used["kube-scheduler"] = cpu_seconds(scheduler.process.proc.pid) or 0.0
        requests = per_pod(api_requests(plane), requests_before, pods)
        counters = per_pod(replica_counters(replica_urls), counters_before, pods)
    finally:
        if profile is not None:
            profile.stop()
        scheduler.stop()
        watch.close()
    kube.delete_namespace_pods(namespace)
    return {
        "pods_per_second": round(pods / elapsed, 1),
        "seconds": round(elapsed, 2),
        "scheduler_start_seconds": round(ready_s, 2),
        "pod_create_seconds": round(created_s, 2),
        "cpu_ms_per_pod": {label: round(1000 * seconds / pods, 2) for label, seconds in used.items()},
        # Every client's requests (ours, kube-scheduler's, the benchmark's watch), per pod.
        "api_requests_per_pod": requests,
        **(
            {
                "redis_round_trips_per_pod": {k[6:]: v for k, v in counters.items() if k.startswith("redis ")},
                # Summed over the replicas, by generation: already inside their CPU per pod.
                "gc_ms_per_pod": {k[6:]: v for k, v in counters.items() if k.startswith("gc ms ")},
            }
            if replica_urls
            else {}
        ),
    }


def is_leader(url: str) -> bool:
    """Whether the replica at ``url`` holds the watch lease, as its readiness answer says."""
    return bool(httpx.get(f"{url}/readyz", timeout=5).json().get("is_leader"))


def lead_by(stack: Stack, index: int, synced: Callable[[], bool]) -> None:
    """Make replica ``index`` the watch leader. The leader applies every watch event on the loop that
    also answers its verbs, so which replica leads moves throughput; left to the start-up race, it
    would differ between phases and between the trees a comparison runs. Every other replica that
    leads is restarted (its lease is released as it stops) until ``index`` holds the lease."""
    for _ in range(3 * len(stack.replicas)):
        leader = wait_for(lambda: next((r for r in stack.replicas if is_leader(r.url)), None), 60, "a watch leader")
        if leader is stack.replicas[index]:
            wait_for(synced, 300, "the replicas' snapshots have every node")
            return
        stack.restart_replica(stack.replicas.index(leader))
    raise RuntimeError(f"replica {index + 1} did not take the watch lease")


def extender_phase(
    plane: ControlPlane,
    kube: Kube,
    workdir: Path,
    redis_url: str,
    args: argparse.Namespace,
    processes: dict[str, int],
    tree: Path | None,
    profile_dir: Path | None,
) -> dict[str, Any]:
    """The phase with our replicas (running ``tree``'s code when given): its figures, the calls the
    replicas answered and their mean server-side time per verb."""
    stack = Stack(plane, redis_url, workdir, replicas=args.replicas, scheduler_verbosity=1, tree=tree)
    try:
        assert stack.scheduler is not None and stack.balancer is not None
        stack.scheduler.stop()  # the phase starts its own once the pods exist
        last = f"node-{args.nodes - 1}"

        def synced() -> bool:
            return all(httpx.get(f"{r.url}/v1/nodes/{last}", timeout=5).status_code == 200 for r in stack.replicas)

        wait_for(synced, 300, "the replicas' snapshots have every node")
        if args.layout == "direct" and args.watch_leader != "any" and len(stack.replicas) > 1:
            lead_by(stack, 0 if args.watch_leader == "filter" else len(stack.replicas) - 1, synced)
        if args.layout == "balancer":
            entries = extender_entries(stack.balancer.url)
        else:
            entries = extender_entries(stack.replicas[0].url)
            entries[1]["urlPrefix"] = stack.replicas[-1].url
        entries = registered(entries, args.verbs)
        role = {0: "replica 1 (filter, prioritize)", len(stack.replicas) - 1: "replica 2 (bind)"}
        labels: dict[str, str] = {}  # replica url -> its label
        measured = dict(processes)
        for i, replica in enumerate(stack.replicas):
            label = role.get(i, f"replica {i + 1}") if args.layout == "direct" else f"replica {i + 1}"
            measured[label] = replica.proc.pid
            labels[replica.url] = label
        profiler = None
        if profile_dir is not None:
            profiler = Profiler(profile_dir, {labels[r.url]: r.proc.pid for r in stack.replicas}, args.profile_rate)
        extended = run_phase(
            *(plane, kube, workdir, stack.name, entries, args.pods, args.apps, args.qps, measured),
            profiler,
            [r.url for r in stack.replicas],
        )
        if profiler is not None:
            extended["profile_files"] = {label: str(path) for label, path in profiler.files.items()}
        # The leader also runs the watch: its CPU per pod is not comparable with the others'.
        extended["watch_leader"] = next(
            (label for url, label in labels.items() if httpx.get(f"{url}/readyz", timeout=5).json().get("is_leader")),
            None,
        )
        calls = {verb: stack.requests(verb) for verb in ("filter", "prioritize", "bind")}
        extended["extender_calls"] = calls
        # Mean server-side time per call, beside kube-scheduler's whole cycle per pod (1000 / pods/s).
        extended["extender_server_ms_mean"] = {
            verb: round(1000 * stack.server_seconds(verb) / count, 2) for verb, count in calls.items() if count
        }
        extended["extender_cpu_ms_per_pod"] = round(
            sum(v for k, v in extended["cpu_ms_per_pod"].items() if k.startswith("replica") or k == "redis"), 2
        )
        if tree is not None:
            extended["tree"] = str(tree)
        return extended
    finally:
        stack.stop()


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
        "without bind, kube-scheduler binds each pod itself, as in the other phases",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --compare: extender phases per tree, later rounds alternating which tree goes first; "
        "compare_rounds lists them, compare_means averages them",
    )
    args = parser.parse_args()
    if args.profile is not None and Profiler.spy() is None:
        parser.error("--profile needs py-spy, which the project does not install: pip install py-spy")
    if not set(args.verbs.split(",")) <= set(VERBS):
        parser.error(f"--verbs: each of {', '.join(VERBS)}")

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
                nothing = NullExtenderProcess()
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

            try:
                extended = extender_phase(plane, kube, workdir, redis.url, args, processes, None, args.profile)
                other = None
                rounds: list[dict[str, Any]] = []
                if args.compare is not None:
                    other = extender_phase(plane, kube, workdir, redis.url, args, processes, args.compare, None)
                    rounds = [round_of("this", extended), round_of("other", other)]
                    # Later rounds alternate which tree goes first, so the machine's drift falls on both.
                    for i in range(1, args.rounds):
                        for tree in (args.compare, None) if i % 2 else (None, args.compare):
                            phase = extender_phase(plane, kube, workdir, redis.url, args, processes, tree, None)
                            rounds.append(round_of("other" if tree else "this", phase))
            finally:
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
                    "verbs": args.verbs,
                    "scheduler_qps": args.qps,
                },
                "node_create_seconds": round(nodes_s, 2),
                "without_extender": plain,
                "with_null_extender": null,
                "with_extender": extended,
                "with_other_tree": other,
                "compare_rounds": rounds or None,
                "compare_means": means(rounds, null) if rounds else None,
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
