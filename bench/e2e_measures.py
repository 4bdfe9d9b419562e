"""What the end-to-end throughput benchmark measures around each phase, beside pods/s.

Who saw every pod bound (``BoundWatch``), the replicas' Python stacks (``Profiler``, py-spy), the
counters the replicas and kube-apiserver keep (Redis round trips, GC time, API requests) per pod, which
verbs our replicas are registered for, and the summary of a ``--compare`` sitting's rounds.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from devstack import http_client
from devstack.controlplane import ControlPlane
from devstack.proc import cpu_seconds


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


class Profiler:
    """py-spy sampling each replica's Python stacks (non-blocking, folded output), one file per replica."""

    def __init__(self, directory: Path, targets: dict[str, int], rate: int) -> None:
        self.directory = directory
        self.targets = targets
        self.rate = rate
        self.procs: list[subprocess.Popen[bytes]] = []
        self.files: dict[str, Path] = {}

    @staticmethod
    def spy() -> str | None:
        found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        return found if Path(found).exists() else None

    def start(self) -> None:
        spy = self.spy()
        assert spy is not None  # checked with the arguments
        self.directory.mkdir(parents=True, exist_ok=True)
        for label, pid in self.targets.items():
            out = self.directory / f"{label.split(' (')[0].replace(' ', '-')}.folded"
            self.files[label] = out
            command = [spy, "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "raw"]
            command += ["--nonblocking", "--output", str(out)]
            self.procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            proc.wait(60)


def replica_counters(replica_urls: list[str]) -> Counter[str]:
    """Counters the replicas reported so far, summed over them: Redis round trips by command (a Lua
    script by its name), milliseconds of garbage collection by generation, filter calls by what
    the equivalence cache answered of them and by how they read the pod, from their /metrics."""
    counts: Counter[str] = Counter()
    for url in replica_urls:
        text = http_client.get(f"{url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "extender_redis_command_duration_seconds_count":
                    counts[f"redis {sample.labels['command']}"] += int(sample.value)
                elif sample.name == "extender_gc_seconds_total":
                    counts[f"gc ms {sample.labels['generation']}"] += round(1000 * sample.value)
                elif sample.name == "extender_equivalence_cache_requests_total" and sample.labels["verb"] == "filter":
                    counts[f"filter {sample.labels['result']}"] += int(sample.value)
                elif sample.name == "extender_filter_pod_reads_total":
                    counts[f"pod read {sample.labels['how']}"] += int(sample.value)
    return counts


def api_requests(plane: ControlPlane) -> Counter[str]:
    """Requests kube-apiserver answered so far, by client, verb and resource (its apiserver_request_total)."""
    counts: Counter[str] = Counter()
    with plane.client(timeout=30) as client:
        text = client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "apiserver_request_total":
                labels = sample.labels
                sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
                counts[f"{labels['verb']} {labels['resource']}{sub}"] += int(sample.value)
    return counts


def per_pod(after: Counter[str], before: Counter[str], pods: int) -> dict[str, float]:
    diff = after - before
    return {key: round(n / pods, 2) for key, n in diff.most_common() if n / pods >= 0.01}


VERBS = ("filter", "prioritize", "preempt", "bind")


def registered(entries: list[dict[str, Any]], verbs: str) -> list[dict[str, Any]]:
    """The extender entries with only ``verbs`` (comma-separated, or ``none``) registered; without bind,
    kube-scheduler binds."""
    wanted = set() if verbs == "none" else set(verbs.split(","))
    out = []
    for entry in entries:
        kept = {k: v for k, v in entry.items() if not (k.endswith("Verb") and k[: -len("Verb")] not in wanted)}
        if any(k.endswith("Verb") for k in kept):
            out.append(kept)
    return out


def cpu_now(processes: dict[str, int]) -> dict[str, float]:
    """Each process's CPU seconds so far (0 once it is gone): a phase's CPU is the difference of two."""
    return {label: cpu_seconds(pid) or 0.0 for label, pid in processes.items()}


def brief(phase: dict[str, Any]) -> dict[str, Any]:
    """A phase's pods/s and kube-scheduler's and kube-apiserver's CPU per pod."""
    return {
        "pods_per_second": phase["pods_per_second"],
        "kube_scheduler_cpu_ms_per_pod": phase["cpu_ms_per_pod"]["kube-scheduler"],
        "kube_apiserver_cpu_ms_per_pod": phase["cpu_ms_per_pod"]["kube-apiserver"],
    }


def round_of(tree: str, phase: dict[str, Any]) -> dict[str, Any]:
    """One extender phase of a ``--compare`` sitting, in brief."""
    return {"tree": tree, **brief(phase), "extender_cpu_ms_per_pod": phase["extender_cpu_ms_per_pod"]}


def _averaged(rows: list[dict[str, Any]], digits: int) -> dict[str, float]:
    """Each numeric field's mean over ``rows`` (``tree`` names the rows, it is not averaged)."""
    return {k: round(sum(r[k] for r in rows) / len(rows), digits) for k in rows[0] if k != "tree"}


def means(rounds: list[dict[str, Any]], null_pods_per_second: float | None) -> dict[str, Any]:
    """Each tree's mean over the rounds (and its pods/s over the null extender's mean)."""
    out: dict[str, Any] = {}
    for tree in ("this", "other"):
        mean: dict[str, Any] = _averaged([r for r in rounds if r["tree"] == tree], 2)
        if null_pods_per_second is not None:
            mean["over_null"] = round(mean["pods_per_second"] / null_pods_per_second, 3)
        out[tree] = mean
    return out


def targets_of(phases: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The issue's ratios for each extender phase of one round (``this``, ``other``), against the
    plain and null phases of the same round (given in brief under ``plain`` and ``null``): the
    machine drifts between rounds more than within one.

    ``over_null``: pods/s over the null extender's (target 1). ``extender_cpu_over_plain_scheduler``:
    the extender's CPU per pod (replicas and Redis) over kube-scheduler's own in the plain phase
    (target 2). ``scheduler_cpu_over_null`` and ``apiserver_cpu_over_null``: their CPU per pod with
    ours over theirs with the null extender (target 3).
    """
    plain, null = phases.get("plain"), phases.get("null")
    out: dict[str, dict[str, float]] = {}
    for name, reference in (("plain", plain), ("null", null)):  # the round's own references, in brief
        if reference is not None:
            out[name] = brief(reference)
    for tree in ("this", "other"):
        ours = phases.get(tree)
        if ours is None:
            continue
        cpu = ours["cpu_ms_per_pod"]
        ratios: dict[str, float] = {}
        if null is not None:
            ratios["over_null"] = round(ours["pods_per_second"] / null["pods_per_second"], 3)
            for process, key in (("kube-scheduler", "scheduler"), ("kube-apiserver", "apiserver")):
                ratios[f"{key}_cpu_over_null"] = round(cpu[process] / null["cpu_ms_per_pod"][process], 3)
        if plain is not None:
            scheduler_alone = plain["cpu_ms_per_pod"]["kube-scheduler"]
            ratios["extender_cpu_over_plain_scheduler"] = round(ours["extender_cpu_ms_per_pod"] / scheduler_alone, 3)
        out[tree] = ratios
    return out


def targets_mean(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each tree's ratios (``targets_of``) averaged over the rounds."""
    out: dict[str, dict[str, float]] = {}
    for tree in ("this", "other"):
        mine = [r[tree] for r in rounds if tree in r]
        if mine:
            out[tree] = _averaged(mine, 3)
    return out


def idle_rates(processes: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's CPU while nothing is being scheduled, in ms per second of ``seconds``: the
    background (watches, leases, timers) a phase's CPU per pod carries in proportion to its length."""
    before = cpu_now(processes)
    started = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - started
    return {label: round(1000 * (now - before[label]) / elapsed, 2) for label, now in cpu_now(processes).items()}
