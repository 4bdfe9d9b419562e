"""Preemption through kube-scheduler and our extender against kube-scheduler alone, on each tested release.

Each scenario is built twice, in two fresh namespaces with identical nodes (each set named after its
namespace, so placements are compared without that prefix): once for a kube-scheduler with no
extender at all (a profile of its own), once for the module's stack (kube-scheduler calling our
replicas for filter, prioritize, preempt and bind). Running pods are bound by name, each with a
``status.startTime`` of its own: kube-scheduler reprieves pods of equal priority oldest first and
breaks its last tie between candidate nodes on the victims' start times, so with no two pods started
at once no two candidate nodes tie and kube-scheduler's choice is never a coin toss. Then the
preemptors come, one at a time, the same in both runs, and each run's outcome is read back from the
API server: where each preemptor was nominated or bound when it settled, where it is bound in the
end, and which of the scenario's pods were deleted. The two outcomes must be equal; kube-scheduler's
own must also be the one the scenario expects (else the scenario does not test what it says).

No kubelet runs: victims deleted with grace 0 vanish at once, and a victim holding a finalizer stays
terminating until the test removes it. Every pod selects its run's nodes by label, so neither
kube-scheduler looks at the other run's nodes (nodes a pod cannot select are never candidates).
kube-scheduler 1.33 and 1.34 can leave a preemptor pending although its node is free (their async
preemption races its own informer): a preemptor that waits so on a node with nothing terminating is
nudged by the deletion of an unrelated scheduled pod, on either run alike (``Run.nudge``).
"""

from __future__ import annotations

import contextlib
import datetime
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devstack import http_client
from devstack.controlplane import ControlPlane
from devstack.kube import Kube, KubeError, priority_class, resources, wait_for
from devstack.scheduler import KubeScheduler
from devstack.stack import Stack
from tests.e2e.preemption_scenarios import SCENARIOS, Budget, Expected, Preemptor, Scenario
from tests.e2e.scenarios import ScenarioCluster, Target
from tests.plugins.e2e_tier import report

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

# Priority classes by value, created once per control plane.
CLASSES = {100: "pf-low", 200: "pf-200", 300: "pf-300", 400: "pf-400", 500: "pf-mid", 1000: "pf-high"}
HOLD = "e2e.example.com/hold"  # a finalizer: its pod stays terminating once deleted, until released
RUN = "e2e.example.com/preemption-run"  # node label naming the run a node belongs to
HOST = "kubernetes.io/hostname"
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)  # running pods started minutes before it
HELD_SECONDS = 3.0  # how long a preemptor held by a terminating victim must stay as it is
SETTLE_SECONDS = 60.0  # for a preemptor to be bound (or nominated, when held)
NUDGE_SECONDS = 5.0  # a preemptor nominated, nothing terminating, not bound for so long is stuck (Run.nudge)


# ------------------------------------------------------------------------------------------- the runs
@dataclass(frozen=True)
class Outcome:
    settled: tuple[tuple[str, str, str], ...]  # (preemptor, "bound" | "nominated" | "unsettled", node)
    bound: tuple[tuple[str, str], ...]  # (preemptor, node it is bound to in the end or "")
    victims: tuple[str, ...]  # the scenario's pods deleted (gone or terminating)

    def __str__(self) -> str:
        settled = ", ".join(f"{name} {state} {node or '-'}" for name, state, node in self.settled)
        bound = ", ".join(f"{name} on {node or '-'}" for name, node in self.bound)
        return f"settled: {settled}; in the end: {bound}; victims: {', '.join(self.victims) or 'none'}"


def started(age: int) -> str:
    return (EPOCH - datetime.timedelta(minutes=age)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Run(ScenarioCluster):
    """One build of a scenario: its namespace, its nodes (named and labelled after the namespace), the
    pods of its scheduler profile."""

    def __init__(self, target: Target, namespace: str, barrier: str, logs: Sequence[Path]) -> None:
        """``logs``: the log files that may name this run's pods (its kube-scheduler's, our replicas')."""
        super().__init__(target, namespace)
        self.barrier = barrier
        self.logs = logs
        self.created: list[str] = []  # the scenario's pods, running ones and preemptors
        self.sentinels = 0
        self.nudges = 0

    def short(self, node: str) -> str:
        return node.removeprefix(f"{self.namespace}-")

    def build(self, scenario: Scenario) -> None:
        ns = self.namespace
        self.kube.create_namespace(ns)
        for budget in scenario.budgets:
            self._budget(budget, sum(1 for p in scenario.pods if p.app == budget.app))
        for node in scenario.nodes:
            taints = [{"key": k, "value": v, "effect": "NoSchedule"} for k, v in node.taints]
            self.node(node.name, cpu=node.cpu, labels={RUN: ns}, taints=taints)
        for pod in scenario.pods:
            body = self.kube.pod_body(
                pod.name,
                scheduler=self.target.scheduler_name,
                requests=resources(cpu=pod.cpu),
                labels={"app": pod.app} if pod.app else None,
                nodeName=f"{ns}-{pod.node}",
                priorityClassName=CLASSES[pod.priority],
            )
            if pod.held:
                body["metadata"]["finalizers"] = [HOLD]
            self.kube.create_pod(ns, body)
            self.created.append(pod.name)
            # No kubelet: write the start time one would (kube-scheduler and we rank victims by it).
            status = {"status": {"phase": "Running", "startTime": started(pod.age)}}
            self.kube.patch(f"/api/v1/namespaces/{ns}/pods/{pod.name}/status", status)

    def _budget(self, budget: Budget, pods: int) -> None:
        path = f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets"
        name = f"guard-{budget.app}"
        spec: dict[str, Any] = {"selector": {"matchLabels": {"app": budget.app}}}
        if budget.min_available is not None:
            spec["minAvailable"] = budget.min_available
        else:
            spec["maxUnavailable"] = budget.allowed
        body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}
        created = self.kube.create(path, body)
        # No disruption controller runs here: write the status it would.
        status = {
            "observedGeneration": created["metadata"].get("generation", 1),
            "disruptionsAllowed": budget.allowed,
            "currentHealthy": pods,
            "desiredHealthy": max(0, pods - budget.allowed),
            "expectedPods": pods,
        }
        self.kube.patch(f"{path}/{name}/status", {"status": status})

    def start_barrier(self) -> str:
        """A pod for this run's kube-scheduler on the barrier node, created after everything else: once
        it is bound, that kube-scheduler has seen the events before it (one pod watch, in order)."""
        self.sentinels += 1
        name = f"sentinel-{self.sentinels}"
        body = self.kube.pod_body(name, scheduler=self.target.scheduler_name, nodeSelector={HOST: self.barrier})
        self.kube.create_pod(self.namespace, body)
        return name

    def finish_barrier(self, scenario: Scenario, sentinel: str) -> None:
        """The sentinel bound, and every replica's snapshot holding it and the scenario's pods (the
        replicas watch pods in order too: they have the start times written before)."""
        self.wait_bound([sentinel], timeout=SETTLE_SECONDS)
        wanted: dict[str, set[str]] = {self.barrier: {sentinel}}
        for pod in scenario.pods:
            wanted.setdefault(f"{self.namespace}-{pod.node}", set()).add(pod.name)

        def synced() -> bool:
            for url in self.target.replica_urls:
                for node, names in wanted.items():
                    resp = http_client.get(f"{url}/v1/nodes/{node}", timeout=5)
                    if resp.status_code != 200:
                        return False
                    held = {p["name"] for p in resp.json()["pods"] if p["namespace"] == self.namespace}
                    if not names <= held:
                        return False
            return True

        try:
            wait_for(synced, SETTLE_SECONDS, "the replicas' snapshots have the scenario's pods")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.target.logs()}") from None

    def create_preemptor(self, preemptor: Preemptor) -> None:
        body = self.kube.pod_body(
            preemptor.name,
            scheduler=self.target.scheduler_name,
            requests=resources(cpu=preemptor.cpu),
            nodeSelector={RUN: self.namespace},
            priorityClassName=CLASSES[preemptor.priority],
        )
        self.kube.create_pod(self.namespace, body)
        self.created.append(preemptor.name)

    def pods_now(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.kube.pods(self.namespace)}

    def victims(self, pods: Mapping[str, dict[str, Any]]) -> tuple[str, ...]:
        return tuple(sorted(n for n in self.created if n not in pods or pods[n]["metadata"].get("deletionTimestamp")))

    def release(self) -> None:
        """Remove the finalizer of every pod holding one: terminating pods vanish."""
        for name, pod in self.pods_now().items():
            if pod["metadata"].get("finalizers"):
                with contextlib.suppress(KubeError):  # deleted meanwhile
                    self.kube.patch(
                        f"/api/v1/namespaces/{self.namespace}/pods/{name}", {"metadata": {"finalizers": None}}
                    )

    def nudge(self) -> None:
        """Delete a scheduled pod (one made for it, on the barrier node): kube-scheduler retries the
        pods waiting for room. kube-scheduler 1.33 and 1.34 may leave a preemptor waiting for good
        when a victim it evicts again was already gone (the deletion it waits for came before)."""
        self.nudges += 1
        name = f"nudge-{self.nudges}"
        body = self.kube.pod_body(name, scheduler=self.target.scheduler_name, nodeName=self.barrier)
        self.kube.create_pod(self.namespace, body)
        self.kube.delete_pod(self.namespace, name)

    def evidence(self) -> str:
        """What the logs say about this run's pods: kube-scheduler's preemptions, our replicas' decisions."""
        lines: list[str] = []
        for path in self.logs:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            named = [
                line
                for line in text.splitlines()
                if f"{self.namespace}/" in line and "sentinel" not in line and "nudge" not in line
            ]
            lines += [f"  {path.name}: {line[:400]}" for line in named[-25:]]
        return "\n".join(lines) or "  (no line names this run's pods)"

    def cleanup(self) -> None:
        self.release()
        super().cleanup()


def settle(runs: Sequence[Run], name: str, held: bool) -> list[tuple[str, str]]:
    """Each run's (state, node) for preemptor ``name`` once it has settled: bound; or, when ``held``,
    nominated, with a victim, and neither its node nor the victims changing for HELD_SECONDS. After
    SETTLE_SECONDS: "unsettled" with the node it is nominated to, if any. A preemptor nominated to a
    node where nothing is terminating that is still not bound after NUDGE_SECONDS gets a nudge."""
    out: dict[int, tuple[str, str]] = {}
    since: dict[int, tuple[float, tuple[str, tuple[str, ...]]]] = {}
    waiting: dict[int, float] = {}  # since when each run's preemptor waits with nothing terminating
    deadline = time.monotonic() + SETTLE_SECONDS
    last: dict[int, str] = {}
    while len(out) < len(runs):
        for i, run in enumerate(runs):
            if i in out:
                continue
            pods = run.pods_now()
            pod = pods.get(name) or {}
            node = (pod.get("spec") or {}).get("nodeName") or ""
            nominated = (pod.get("status") or {}).get("nominatedNodeName") or ""
            last[i] = nominated
            now = time.monotonic()
            if node:
                out[i] = ("bound", run.short(node))
                continue
            if held and nominated:
                state = (nominated, run.victims(pods))
                seen = since.get(i)
                if seen is None or seen[1] != state:
                    since[i] = (now, state)
                elif now - seen[0] >= HELD_SECONDS and state[1]:
                    out[i] = ("nominated", run.short(nominated))
                continue
            terminating = any(
                p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") == nominated for p in pods.values()
            )
            if not nominated or terminating:
                waiting.pop(i, None)
            elif now - waiting.setdefault(i, now) >= NUDGE_SECONDS:
                run.nudge()
                waiting[i] = now
        if len(out) == len(runs):
            break
        if time.monotonic() > deadline:
            for i, run in enumerate(runs):
                out.setdefault(i, ("unsettled", run.short(last.get(i, ""))))
            break
        time.sleep(0.2)
    return [out[i] for i in range(len(runs))]


def play(scenario: Scenario, runs: Sequence[Run]) -> list[Outcome]:
    """Build the scenario in every run, then send its preemptors one by one to all runs at once."""
    for run in runs:
        run.build(scenario)
    sentinels = [run.start_barrier() for run in runs]
    for run, sentinel in zip(runs, sentinels, strict=True):
        run.finish_barrier(scenario, sentinel)
    settled: list[list[tuple[str, str, str]]] = [[] for _ in runs]
    for preemptor in scenario.preemptors:
        for run in runs:
            run.create_preemptor(preemptor)
        for i, (state, node) in enumerate(settle(runs, preemptor.name, preemptor.held)):
            settled[i].append((preemptor.name, state, node))
    if any(p.held for p in scenario.preemptors):
        for run in runs:
            run.release()
    bound: list[list[tuple[str, str]]] = [[] for _ in runs]
    for preemptor in scenario.preemptors:
        for i, (state, node) in enumerate(settle(runs, preemptor.name, False)):
            bound[i].append((preemptor.name, node if state == "bound" else ""))
    victims = [run.victims(run.pods_now()) for run in runs]
    return [Outcome(tuple(settled[i]), tuple(bound[i]), victims[i]) for i in range(len(runs))]


# ------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def alone(control_plane: ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeScheduler]:
    """A kube-scheduler with no extender, a profile of its own; and the scenarios' priority classes."""
    for value, name in CLASSES.items():
        resp = kube.http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=priority_class(name, value))
        if resp.status_code not in (201, 409):
            raise KubeError(f"priority class {name}: {resp.status_code} {resp.text[:300]}")
    scheduler = KubeScheduler(
        control_plane, f"alone-{secrets.token_hex(3)}", [], tmp_path_factory.mktemp("alone-scheduler")
    )
    yield scheduler
    scheduler.stop()


@pytest.fixture(scope="module")
def barrier(kube: Kube, stack: Stack) -> Iterator[str]:
    """A roomy node no preemptor may use, where each run's sentinel pods go (``Run.start_barrier``)."""
    name = f"pf-barrier-{secrets.token_hex(3)}"
    kube.create_node(name, cpu="64", pods=1000)
    wait_for(
        lambda: all(r.get(f"/v1/nodes/{name}").status_code == 200 for r in stack.replicas),
        SETTLE_SECONDS,
        "the replicas' snapshots have the barrier node",
    )
    yield name
    kube.delete_node(name)


@pytest.fixture(scope="module")
def tally(control_plane: ControlPlane) -> Iterator[list[bool]]:
    """Whether each scenario's two outcomes agreed; one line at the end of the run per release."""
    agreed: list[bool] = []
    yield agreed
    report(f"preemption vs kube-scheduler v{control_plane.version}: {len(agreed)} scenarios, {sum(agreed)} agree")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_preemption_decides_as_kube_scheduler_alone(
    scenario: Scenario,
    kube: Kube,
    stack: Stack,
    alone: KubeScheduler,
    barrier: str,
    tally: list[bool],
    control_plane: ControlPlane,
) -> None:
    token = secrets.token_hex(3)
    bare = Run(Target(kube, alone.name, [], alone.log), f"pf-{token}-alone", barrier, [alone.process.log_path])
    logs = [r.log_path for r in stack.replicas]
    if stack.scheduler is not None:
        logs.insert(0, stack.scheduler.process.log_path)
    ours = Run(Target(kube, stack.name, [r.url for r in stack.replicas], stack.logs), f"pf-{token}-ours", barrier, logs)
    runs = (bare, ours)
    try:
        theirs, mine = play(scenario, runs)
    finally:
        for run in runs:
            run.cleanup()
    tally.append(theirs == mine)
    assert theirs == mine, (
        f"{scenario.describe()}\n"
        f"kube-scheduler alone ({bare.namespace}, {bare.nudges} nudges): {theirs}\n"
        f"with our extender ({ours.namespace}, {ours.nudges} nudges): {mine}\n"
        f"logs of kube-scheduler alone:\n{bare.evidence()}\n"
        f"logs of kube-scheduler and our replicas:\n{ours.evidence()}"
    )
    # kube-scheduler alone must have preempted, and as the scenario says (else it tests something else).
    assert all(node for _, node in theirs.bound) and theirs.victims, f"{scenario.describe()}\nno preemption: {theirs}"
    if scenario.expect is not None:
        minor = int(control_plane.version.split(".")[1])
        expected = scenario.expect(minor)
        got = Expected(dict(theirs.bound), frozenset(theirs.victims))
        assert got == expected, (
            f"{scenario.describe()}\nkube-scheduler v{control_plane.version} alone: {theirs}\n"
            f"the scenario expects: bound {dict(expected.nodes)}, victims {sorted(expected.victims)}\n"
            f"{bare.evidence()}"
        )
