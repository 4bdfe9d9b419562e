"""Soak: a steady stream of pods through the real kube-scheduler at 80% of the capacity measured
first, with one replica restarted again and again from halfway on.

Pods come in waves (plain pods and one gang of three each); a wave is deleted once all of it is
bound and it has lived a few seconds, so the cluster churns without filling up. What must hold:
every pod ends bound (the cluster has room for all of them; a pod still pending at the end must
carry kube-scheduler's reason), no node ever holds more than it can, no extender call failed at
kube-scheduler (each restart is a SIGTERM, which drains the replica's connections before it stops:
a connection closed under a call fails that call with EOF), no replica logged a traceback, and the
replica that ran throughout grew by less than ``RSS_GROWTH_MB``. ``EXTENDER_SOAK_SECONDS`` sets the
length of the stream (30 s by default; docs/FAULTS.md has the figures of a 10-minute run).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devstack.kube import Kube, resources, wait_for
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack
from tests.e2e.test_gangs import legacy
from tests.plugins.e2e_tier import report

pytestmark = pytest.mark.e2e

SOAK_SECONDS = float(os.environ.get("EXTENDER_SOAK_SECONDS", "30"))
NODES, NODE_CPU = 16, 8
POD_MILLICPU = 100
# The burst that measures capacity: long enough to be a sustained rate, and created by this process as
# the stream is, so its own share of the two cores is counted.
CAPACITY_PODS = 600
WAVE_SECONDS = 2.0
WAVE_LIFETIME = 6.0  # a fully bound wave is deleted this long after it started
GANG_SIZE = 3
LOAD = 0.8
RSS_GROWTH_MB = 64
EXTENDER_ERROR = re.compile(r'Post \\?"http://127\.0\.0\.1:\d+/(filter|prioritize|preempt|bind)\\?"')


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class Wave:
    number: int
    started: float
    names: list[str] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)


class Stream:
    """Creates waves at a given rate and retires the bound ones; remembers where every pod went."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.kube: Kube = cluster.kube
        self.waves: list[Wave] = []
        self.created = 0
        self.retired: list[Wave] = []
        self.overfull: list[str] = []

    def create(self, wave: Wave, name: str, gang: str | None = None) -> None:
        labels = {"wave": str(wave.number), **(legacy(gang, GANG_SIZE) if gang else {})}
        self.cluster.pod(name, requests=resources(cpu=f"{POD_MILLICPU}m"), labels=labels)
        wave.names.append(name)
        self.created += 1

    def retire(self, now: float, final: bool = False) -> None:
        """Delete every wave that is wholly bound and old enough, checking node capacity on the way."""
        placement = self.cluster.placement()
        self.check_capacity(placement)
        for wave in list(self.waves):
            if not final and now - wave.started < WAVE_LIFETIME:
                continue
            if all(placement.get(n) for n in wave.names):
                wave.placement = {n: placement[n] for n in wave.names}
                self.kube.delete_pods(self.cluster.namespace, f"wave={wave.number}")
                self.waves.remove(wave)
                self.retired.append(wave)

    def check_capacity(self, placement: dict[str, str]) -> None:
        per_node = Counter(node for node in placement.values() if node)
        for node, count in per_node.items():
            if count * POD_MILLICPU > NODE_CPU * 1000:
                self.overfull.append(f"{node}: {count} pods")

    def run(self, rate: float, seconds: float, halfway: threading.Event) -> None:
        start = time.monotonic()
        wave: Wave | None = None
        made = 0
        last_retire = start
        while (now := time.monotonic()) - start < seconds:
            if wave is None or now - wave.started >= WAVE_SECONDS:
                wave = Wave(len(self.waves) + len(self.retired), now)
                self.waves.append(wave)
                gang = f"g{wave.number}"
                for i in range(GANG_SIZE):
                    self.create(wave, f"{gang}-{i}", gang)
                made += GANG_SIZE
            due = int(rate * (now - start))
            while made < due:
                self.create(wave, f"w{wave.number}-p{made}")
                made += 1
            if now - last_retire >= 1.0:
                self.retire(now)
                last_retire = now
            if not halfway.is_set() and now - start >= seconds / 2:
                halfway.set()
            time.sleep(0.02)


def measure_capacity(cluster: Cluster) -> float:
    """Pods per second the stack binds from a burst of CAPACITY_PODS plain pods, from the first
    creation to the last bind."""
    names = [f"burst-{i}" for i in range(CAPACITY_PODS)]
    start = time.monotonic()
    for name in names:
        cluster.pod(name, requests=resources(cpu=f"{POD_MILLICPU}m"), labels={"burst": "yes"})
    cluster.wait_bound(names, timeout=120)
    elapsed = time.monotonic() - start
    cluster.kube.delete_pods(cluster.namespace, "burst=yes")
    wait_for(lambda: not cluster.kube.pods(cluster.namespace, "burst=yes"), 60, "the burst deleted")
    return CAPACITY_PODS / elapsed


# The capacity burst, the stream and the settling, with room to spare.
@pytest.mark.timeout(SOAK_SECONDS + 300)
def test_a_stream_at_80_percent_of_capacity_survives_replica_restarts(cluster: Cluster, stack: Stack) -> None:
    cluster.nodes(NODES, cpu=str(NODE_CPU), pods=200)
    cluster.wait_synced()
    capacity = measure_capacity(cluster)
    rate = LOAD * capacity
    steady = stack.replicas[1]
    rss_start = rss_mb(steady.proc.pid)
    scheduler_log = Path(stack.scheduler.process.log_path) if stack.scheduler else None
    log_offset = scheduler_log.stat().st_size if scheduler_log else 0

    halfway = threading.Event()
    restarted: list[float] = []

    over = threading.Event()

    def restart_from_halfway() -> None:
        halfway.wait()
        while not over.is_set():
            began = time.monotonic()
            stack.restart_replica(0)
            restarted.append(time.monotonic() - began)
            over.wait(0.5)

    restarter = threading.Thread(target=restart_from_halfway, name="soak-restart", daemon=True)
    restarter.start()
    stream = Stream(cluster)
    began = time.monotonic()
    stream.run(rate, SOAK_SECONDS, halfway)
    over.set()
    restarter.join(90)
    assert restarted, "the replica was not restarted"

    def settled() -> bool | None:
        stream.retire(time.monotonic(), final=True)
        return not stream.waves or None

    try:
        wait_for(settled, 180, "every wave bound", interval=1.0)
    except TimeoutError:
        pods = cluster.kube.pods(cluster.namespace)
        pending = {
            p["metadata"]["name"]: [
                c.get("reason") for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"
            ]
            for p in pods
            if not p["spec"].get("nodeName")
        }
        without_reason = [name for name, reasons in pending.items() if not any(reasons)]
        raise AssertionError(
            f"{len(pending)} pods pending at the end ({len(without_reason)} without a reason): "
            f"{dict(list(pending.items())[:10])}\n{stack.logs()}"
        ) from None
    duration = time.monotonic() - began

    bound = sum(len(w.placement) for w in stream.retired)
    assert bound == stream.created, "every pod created was seen bound before its wave was deleted"
    assert stream.overfull == []
    nodes_used = len({node for w in stream.retired for node in w.placement.values()})

    log = scheduler_log.read_text(errors="replace")[log_offset:] if scheduler_log else ""
    failed_calls = [line for line in log.splitlines() if EXTENDER_ERROR.search(line)]
    assert failed_calls == [], "extender calls failed at kube-scheduler:\n" + "\n".join(failed_calls[:5])
    for replica in stack.replicas:
        assert "Traceback" not in replica.log(), replica.log()[-4000:]

    growth = rss_mb(steady.proc.pid) - rss_start
    assert growth < RSS_GROWTH_MB, f"the steady replica grew by {growth:.1f} MB"
    report(
        f"soak: {SOAK_SECONDS:.0f} s stream at {rate:.1f} pods/s (80% of the {capacity:.1f} pods/s measured), "
        f"{stream.created} pods in {len(stream.retired)} waves with a gang of {GANG_SIZE} each, all bound "
        f"on {nodes_used} of {NODES} nodes, settled after {duration:.0f} s; replica restarted {len(restarted)} "
        f"times from halfway on, each back in {min(restarted):.1f}-{max(restarted):.1f} s; no extender call failed; "
        f"steady replica RSS {rss_start:.0f} -> {rss_start + growth:.0f} MB"
    )
