"""End-to-end scenarios written once, run against two stacks: the e2e tier's loopback control plane
(tests/e2e/test_scenarios.py, in CI) and the compose stack (tests/compose/stack_scenarios.py, its
test runner). Both are a real kube-apiserver and kube-scheduler calling our replicas for filter,
prioritize, preempt and bind; nodes are API objects (no kubelet), and each scenario asserts where
pods ended up by reading them back from the API server.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from devstack import http_client
from devstack.kube import Kube, KubeError, priority_class, resources, wait_for
from devstack.metrics import sample_total

LOW_PRIORITY = "scenario-low"
HIGH_PRIORITY = "scenario-high"
LEGACY = ("pod-group.scheduling.sigs.k8s.io/name", "pod-group.scheduling.sigs.k8s.io/min-available")
POD_GROUP = "scheduling.x-k8s.io/pod-group"
POD_GROUP_MIN = "scheduling.x-k8s.io/min-available"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


@dataclass
class Target:
    """Where the scenarios run: an admin client of the API server, the kube-scheduler profile that
    calls our replicas, and each replica's URL (to see its snapshot and counters)."""

    kube: Kube
    scheduler_name: str
    replica_urls: Sequence[str]
    logs: Callable[[], str] = field(default=lambda: "")


def prepare(kube: Kube) -> None:
    """The priority classes the scenarios use; several stacks may share one API server."""
    for name, value in ((LOW_PRIORITY, 100), (HIGH_PRIORITY, 1000)):
        resp = kube.http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=priority_class(name, value))
        if resp.status_code not in (201, 409):
            raise KubeError(f"priority class {name}: {resp.status_code} {resp.text[:300]}")


class ScenarioCluster:
    """One scenario's view: its namespace, the nodes it made, and waits that fail with the logs."""

    def __init__(self, target: Target, namespace: str) -> None:
        self.target = target
        self.kube = target.kube
        self.namespace = namespace
        self.node_names: list[str] = []

    def node(self, name: str, **kwargs: Any) -> str:
        full = f"{self.namespace}-{name}"
        self.kube.create_node(full, **kwargs)
        self.node_names.append(full)
        return full

    def nodes(self, count: int, prefix: str = "n", **kwargs: Any) -> list[str]:
        return [self.node(f"{prefix}{i}", **kwargs) for i in range(count)]

    def pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        body = self.kube.pod_body(name, scheduler=self.target.scheduler_name, **kwargs)
        return self.kube.create_pod(self.namespace, body)

    def placement(self) -> dict[str, str]:
        return self.kube.placement(self.namespace)

    def bound(self, names: Sequence[str]) -> list[str]:
        placed = self.placement()
        return [n for n in names if placed.get(n)]

    def wait_bound(self, names: Sequence[str], timeout: float = 60) -> dict[str, str]:
        """Every pod in ``names`` bound; fails with the placement and the stack's logs."""

        def check() -> dict[str, str] | None:
            placed = self.placement()
            return placed if all(placed.get(n) for n in names) else None

        try:
            return wait_for(check, timeout, f"pods {list(names)} bound")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\nplacement: {self.placement()}\n{self.target.logs()}") from None

    def stays_unbound(self, names: Sequence[str], seconds: float) -> None:
        """For ``seconds``, none of ``names`` is bound."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.bound(names) == [], f"bound too early: {self.placement()}"
            time.sleep(0.3)

    def wait_synced(self, timeout: float = 30) -> None:
        """Every replica's snapshot has this scenario's nodes (the watch has written them)."""

        def check() -> bool:
            return all(
                http_client.get(f"{url}/v1/nodes/{name}", timeout=2).status_code == 200
                for url in self.target.replica_urls
                for name in self.node_names
            )

        wait_for(check, timeout, "the replicas' snapshots have the nodes")

    def requests(self, verb: str) -> dict[str, int]:
        """``{replica URL: calls of verb answered}``, from each replica's /metrics."""
        counts: dict[str, int] = {}
        for url in self.target.replica_urls:
            text = http_client.get(f"{url}/metrics", timeout=5).text
            counts[url] = int(sample_total(text, "extender_requests_total", verb=verb))
        return counts

    def extender_events(self) -> dict[tuple[str, str], set[str]]:
        """``{(kind, name): {reason, ...}}`` of the Events our replicas wrote in the namespace."""
        out: dict[tuple[str, str], set[str]] = {}
        for event in self._extender_events():
            involved = event["involvedObject"]
            out.setdefault((involved["kind"], involved["name"]), set()).add(event["reason"])
        return out

    def extender_messages(self, kind: str, name: str, reason: str) -> list[str]:
        """The messages of our replicas' Events of ``reason`` on one object."""
        out: list[str] = []
        for event in self._extender_events():
            involved = event["involvedObject"]
            if (involved["kind"], involved["name"], event["reason"]) == (kind, name, reason):
                out.append(str(event.get("message", "")))
        return out

    def _extender_events(self) -> list[dict[str, Any]]:
        events = self.kube.events(self.namespace)
        return [e for e in events if (e.get("source") or {}).get("component") == "kube-gang-extender"]

    def cleanup(self) -> None:
        self.kube.delete_namespace_pods(self.namespace)
        for name in self.node_names:
            self.kube.delete_node(name)


@contextlib.contextmanager
def scenario_cluster(target: Target) -> Iterator[ScenarioCluster]:
    """A fresh namespace for one scenario; its pods and nodes are deleted afterwards."""
    namespace = f"scn-{secrets.token_hex(3)}"
    target.kube.create_namespace(namespace)
    cluster = ScenarioCluster(target, namespace)
    try:
        yield cluster
    finally:
        cluster.cleanup()


def plain_pods_fill_each_node_to_its_capacity(c: ScenarioCluster) -> None:
    nodes = c.nodes(3, cpu="2")
    c.wait_synced()
    names = [f"p{i}" for i in range(6)]
    for name in names:
        c.pod(name, requests=resources(cpu="1"))
    placed = c.wait_bound(names)
    assert Counter(placed[n] for n in names) == dict.fromkeys(nodes, 2)
    # No room is left anywhere: a seventh pod stays pending.
    c.pod("p6", requests=resources(cpu="1"))
    c.stays_unbound(["p6"], 3)


def a_podgroup_gang_waits_for_its_minimum_then_binds_whole(c: ScenarioCluster) -> None:
    nodes = c.nodes(3, cpu="2")
    c.wait_synced()
    spec = {"minMember": 3}
    body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "trainer"}}
    c.kube.create(PODGROUPS.format(ns=c.namespace), {**body, "spec": spec})
    members = [f"trainer-{i}" for i in range(3)]
    for name in members[:2]:
        c.pod(name, requests=resources(cpu="1500m"), labels={POD_GROUP: "trainer"})
    c.stays_unbound(members[:2], 4)
    c.pod(members[2], requests=resources(cpu="1500m"), labels={POD_GROUP: "trainer"})
    placed = c.wait_bound(members)
    assert sorted(placed[n] for n in members) == sorted(nodes), "one member of 1.5 CPU per node of 2"

    # The watch leader writes the group's status and the replicas record the decisions as Events,
    # each through its RBAC (podgroups/status patch, events create).
    def scheduled() -> dict[str, Any] | None:
        status: dict[str, Any] = ((c.kube.get(f"{PODGROUPS.format(ns=c.namespace)}/trainer") or {}).get("status")) or {}
        return status if status.get("phase") == "Scheduled" else None

    try:
        status = wait_for(scheduled, 30, "the PodGroup status Scheduled")
        wait_for(lambda: "GangPermitted" in c.extender_events().get(("PodGroup", "trainer"), set()), 30, "Events")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nevents: {c.extender_events()}\n{c.target.logs()}") from None
    assert status["scheduled"] == 3


def a_gang_that_cannot_fit_binds_nothing_and_another_binds(c: ScenarioCluster) -> None:
    c.nodes(4, cpu="4")
    c.wait_synced()
    # Five members of 3 CPUs: 15 of the 16 CPUs, but one member per node, so only four fit.
    big = [f"big-{i}" for i in range(5)]
    for name in big:
        c.pod(name, requests=resources(cpu="3"), labels={POD_GROUP: "big"}, annotations={POD_GROUP_MIN: "5"})
    small = [f"small-{i}" for i in range(3)]
    for name in small:
        c.pod(name, requests=resources(cpu="1"), labels={LEGACY[0]: "small", LEGACY[1]: "3"})
    c.wait_bound(small)
    c.stays_unbound(big, 5)


def a_high_priority_pod_preempts_a_lower_one(c: ScenarioCluster) -> None:
    c.nodes(2, cpu="2")
    c.wait_synced()
    low = ["low-0", "low-1"]
    for name in low:
        c.pod(name, requests=resources(cpu="2"), priorityClassName=LOW_PRIORITY)
    before = c.wait_bound(low)
    preempts = sum(c.requests("preempt").values())
    c.pod("urgent", requests=resources(cpu="2"), priorityClassName=HIGH_PRIORITY)
    placed = c.wait_bound(["urgent"])
    survivors = [n for n in low if placed.get(n)]
    assert len(survivors) == 1, f"exactly one victim: {placed}"
    victim = next(n for n in low if n not in survivors)
    assert placed["urgent"] == before[victim]
    assert placed[survivors[0]] == before[survivors[0]]
    assert sum(c.requests("preempt").values()) > preempts, "kube-scheduler asked our preempt verb"


Scenario = Callable[[ScenarioCluster], None]
SCENARIOS: dict[str, Scenario] = {
    scenario.__name__: scenario
    for scenario in (
        plain_pods_fill_each_node_to_its_capacity,
        a_podgroup_gang_waits_for_its_minimum_then_binds_whole,
        a_gang_that_cannot_fit_binds_nothing_and_another_binds,
        a_high_priority_pod_preempts_a_lower_one,
    )
}
