"""The phases of ``bench_e2e_throughput``: one kube-scheduler run over freshly created pods, with no
extender, the null extender or our replicas, and a round of them in the order that spreads the
machine's drift."""

from __future__ import annotations

import argparse
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.e2e_measures import (
    BoundWatch,
    Profiler,
    api_requests,
    cpu_now,
    idle_rates,
    per_pod,
    registered,
    replica_counters,
)
from bench.e2e_workload import create_all, pod_bodies
from devstack import http_client
from devstack.controlplane import ControlPlane
from devstack.kube import Kube, wait_for
from devstack.null_extender import NullExtenderProcess
from devstack.proc import cpu_seconds
from devstack.scheduler import KubeScheduler, extender_entries
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
    before = cpu_now(processes)
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
        used = {label: now - before[label] for label, now in cpu_now(processes).items()}
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
                # Filter calls per pod by the equivalence cache's part in them (recalled: the class's
                # verdicts on the same snapshot answered the whole call).
                "filter_cache_per_pod": {k[7:]: v for k, v in counters.items() if k.startswith("filter ")},
                # Filter calls per pod by how the pod was read (shape: a shape met before, app.pod_shapes).
                "filter_pod_reads_per_pod": {k[9:]: v for k, v in counters.items() if k.startswith("pod read ")},
            }
            if replica_urls
            else {}
        ),
    }


def is_leader(url: str) -> bool:
    """Whether the replica at ``url`` holds the watch lease, as its readiness answer says."""
    return bool(http_client.get(f"{url}/readyz", timeout=5).json().get("is_leader"))


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


@dataclass(frozen=True, slots=True)
class Sitting:
    """What every phase of one run shares: the control plane, Redis, the options and the processes
    whose CPU each phase counts (name -> pid)."""

    plane: ControlPlane
    kube: Kube
    workdir: Path
    redis_url: str
    args: argparse.Namespace
    processes: dict[str, int]


def extender_phase(sitting: Sitting, tree: Path | None, profile_dir: Path | None) -> dict[str, Any]:
    """The phase with our replicas (running ``tree``'s code when given): its figures, the calls the
    replicas answered and their mean server-side time per verb."""
    plane, kube, workdir, args = sitting.plane, sitting.kube, sitting.workdir, sitting.args
    stack = Stack(plane, sitting.redis_url, workdir, replicas=args.replicas, scheduler_verbosity=1, tree=tree)
    try:
        assert stack.scheduler is not None and stack.balancer is not None
        stack.scheduler.stop()  # the phase starts its own once the pods exist
        last = f"node-{args.nodes - 1}"

        def synced() -> bool:
            return all(
                http_client.get(f"{r.url}/v1/nodes/{last}", timeout=5).status_code == 200 for r in stack.replicas
            )

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
        measured = dict(sitting.processes)
        for i, replica in enumerate(stack.replicas):
            label = role.get(i, f"replica {i + 1}") if args.layout == "direct" else f"replica {i + 1}"
            measured[label] = replica.proc.pid
            labels[replica.url] = label
        idle = idle_rates(measured, args.idle) if args.idle else None
        profiler = None
        if profile_dir is not None:
            profiler = Profiler(profile_dir, {labels[r.url]: r.proc.pid for r in stack.replicas}, args.profile_rate)
        extended = run_phase(
            *(plane, kube, workdir, stack.name, entries, args.pods, args.apps, args.qps, measured),
            profiler,
            [r.url for r in stack.replicas],
        )
        if idle is not None:
            extended["idle_cpu_ms_per_second"] = idle
        if profiler is not None:
            extended["profile_files"] = {label: str(path) for label, path in profiler.files.items()}
        # The leader also runs the watch: its CPU per pod is not comparable with the others'.
        extended["watch_leader"] = next(
            (
                label
                for url, label in labels.items()
                if http_client.get(f"{url}/readyz", timeout=5).json().get("is_leader")
            ),
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


def run_round(sitting: Sitting, index: int) -> dict[str, dict[str, Any]]:
    """Round ``index``: the plain phase, the null extender's, ours and (``--compare``) the other tree's,
    by name. Every other round runs them in the reverse order, so the machine's drift falls on every
    phase alike; only the first round's phase of ours is profiled."""
    plane, kube, workdir, args = sitting.plane, sitting.kube, sitting.workdir, sitting.args
    processes = sitting.processes
    kinds = ["plain", *(["null"] if args.null_extender else []), "this", *(["other"] if args.compare else [])]
    if index % 2:
        kinds.reverse()
    phases: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        if kind == "plain":
            phases[kind] = run_phase(plane, kube, workdir, "plain", [], args.pods, args.apps, args.qps, processes)
        elif kind == "null":
            nothing = NullExtenderProcess()
            try:
                phases[kind] = run_phase(
                    *(plane, kube, workdir, "null", nothing.entries(), args.pods, args.apps, args.qps),
                    {**processes, "null extender": nothing.proc.pid},
                )
            finally:
                nothing.stop()
        else:
            tree = args.compare if kind == "other" else None
            profile = args.profile if index == 0 and kind == "this" else None
            phases[kind] = extender_phase(sitting, tree, profile)
    return phases
