"""The preemption scenarios ``test_preemption_fidelity`` plays through kube-scheduler alone and through
kube-scheduler with our extender: written ones, each saying what kube-scheduler decides and why, and
seeded random ones."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

APPS = ("web", "db", "cache")


@dataclass(frozen=True)
class Node:
    name: str
    cpu: str = "4"
    taints: tuple[tuple[str, str], ...] = ()  # (key, value), effect NoSchedule


@dataclass(frozen=True)
class Running:
    """A pod already running on a node (bound by name)."""

    name: str
    node: str
    priority: int
    cpu: str
    age: int  # minutes started before the run's epoch: among equal priorities the older is the more important
    app: str = ""  # its label app=..., which disruption budgets select
    held: bool = False  # holds a finalizer: stays terminating once deleted


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget over app=``app``; no disruption controller runs, so its status is written."""

    app: str
    allowed: int  # status.disruptionsAllowed
    min_available: int | None = None  # the spec's minAvailable; else maxUnavailable: ``allowed``


@dataclass(frozen=True)
class Preemptor:
    name: str
    cpu: str
    priority: int = 1000
    held: bool = False  # settles nominated, its victim terminating, until the test releases the victims


@dataclass(frozen=True)
class Expected:
    """What kube-scheduler alone does: where each preemptor ends up bound, which pods were deleted."""

    nodes: Mapping[str, str]
    victims: frozenset[str]


@dataclass(frozen=True)
class Scenario:
    id: str
    what: str
    nodes: tuple[Node, ...]
    pods: tuple[Running, ...]
    preemptors: tuple[Preemptor, ...]
    budgets: tuple[Budget, ...] = ()
    expect: Callable[[int], Expected] | None = None  # by the release's minor; None: not written down

    def describe(self) -> str:
        lines = [f"scenario {self.id}: {self.what}"]
        for node in self.nodes:
            taints = "".join(f", taint {k}={v}:NoSchedule" for k, v in node.taints)
            pods = ", ".join(
                f"{p.name} (priority {p.priority}, cpu {p.cpu}, started {p.age}m before"
                + (f", app={p.app}" if p.app else "")
                + (", finalizer" if p.held else "")
                + ")"
                for p in self.pods
                if p.node == node.name
            )
            lines.append(f"  node {node.name} (cpu {node.cpu}{taints}): {pods or 'empty'}")
        for budget in self.budgets:
            lines.append(f"  PDB over app={budget.app}: disruptionsAllowed {budget.allowed}")
        for p in self.preemptors:
            lines.append(f"  then preemptor {p.name}: priority {p.priority}, cpu {p.cpu}")
        return "\n".join(lines)


def fixed(nodes: Mapping[str, str], victims: Sequence[str]) -> Callable[[int], Expected]:
    """The same expectation on every release."""
    return lambda _minor: Expected(dict(nodes), frozenset(victims))


def by_release(before_32: Expected, from_32: Expected) -> Callable[[int], Expected]:
    return lambda minor: before_32 if minor < 32 else from_32


URGENT = (Preemptor("urgent", cpu="4"),)

WRITTEN = (
    Scenario(
        "fewest-victims-on-one-node",
        "one node full of low-priority pods: the oldest are reprieved, only as many go as the preemptor needs",
        (Node("n1"),),
        tuple(Running(f"l{i}", "n1", 100, "1", age) for i, age in enumerate((40, 30, 20, 10), start=1)),
        (Preemptor("urgent", cpu="2"),),
        expect=fixed({"urgent": "n1"}, ["l3", "l4"]),
    ),
    Scenario(
        "least-important-victims",
        "the node whose victim has the lower priority (though the other's started later)",
        (Node("n1"), Node("n2")),
        (Running("a", "n1", 300, "4", 10), Running("b", "n2", 100, "4", 50)),
        URGENT,
        expect=fixed({"urgent": "n2"}, ["b"]),
    ),
    Scenario(
        "no-pdb-violation-first",
        "a PDB (maxUnavailable 0) guards the lower-priority victim: the node without a violation",
        (Node("n1"), Node("n2")),
        (Running("g", "n1", 100, "4", 10, app="guarded"), Running("u", "n2", 300, "4", 50, app="plain")),
        URGENT,
        budgets=(Budget("guarded", 0),),
        expect=fixed({"urgent": "n2"}, ["u"]),
    ),
    Scenario(
        "fewest-pdb-violations",
        "every candidate violates a PDB (minAvailable): the node with fewer violations, its victims' "
        "higher priority notwithstanding",
        (Node("n1"), Node("n2")),
        (
            Running("a1", "n1", 300, "2", 20, app="alpha"),
            Running("a2", "n1", 300, "2", 21, app="alpha"),
            Running("b1", "n2", 100, "2", 5, app="beta"),
            Running("b2", "n2", 100, "2", 6, app="beta"),
        ),
        URGENT,
        budgets=(Budget("alpha", 1, min_available=1), Budget("beta", 0, min_available=2)),
        expect=fixed({"urgent": "n1"}, ["a1", "a2"]),
    ),
    Scenario(
        "strictly-lower-priority-only",
        "a mid-priority preemptor: the mid-priority pod is no victim, so its node is no candidate",
        (Node("n1"), Node("n2")),
        (
            Running("m1", "n1", 500, "3", 5),
            Running("l1", "n1", 100, "1", 60),
            Running("l2", "n2", 100, "2", 50),
            Running("l3", "n2", 100, "2", 40),
        ),
        (Preemptor("urgent", cpu="2", priority=500),),
        expect=fixed({"urgent": "n2"}, ["l3"]),
    ),
    Scenario(
        "untolerated-taint",
        "the node with the cheapest victim has a NoSchedule taint the preemptor does not tolerate",
        (Node("n1", taints=(("dedicated", "reserved"),)), Node("n2")),
        (Running("l1", "n1", 100, "4", 5), Running("m1", "n2", 400, "4", 50)),
        URGENT,
        expect=fixed({"urgent": "n2"}, ["m1"]),
    ),
    Scenario(
        "one-victim-over-two",
        "two victims on one node, one of the same priority on the other (started earlier)",
        (Node("n1"), Node("n2")),
        (Running("a1", "n1", 100, "2", 5), Running("a2", "n1", 100, "2", 6), Running("b1", "n2", 100, "4", 60)),
        URGENT,
        expect=fixed({"urgent": "n2"}, ["b1"]),
    ),
    Scenario(
        "smallest-priority-sum",
        "the same highest priority and count of victims: the smaller sum of priorities",
        (Node("n1"), Node("n2")),
        (
            Running("a1", "n1", 300, "2", 5),
            Running("a2", "n1", 200, "2", 6),
            Running("b1", "n2", 300, "2", 60),
            Running("b2", "n2", 100, "2", 61),
        ),
        URGENT,
        expect=fixed({"urgent": "n2"}, ["b1", "b2"]),
    ),
    Scenario(
        "latest-start-time",
        "one victim of the same priority everywhere: the one started last (status.startTime)",
        (Node("n1"), Node("n2"), Node("n3")),
        (Running("a", "n1", 100, "4", 30), Running("b", "n2", 100, "4", 10), Running("c", "n3", 100, "4", 20)),
        URGENT,
        expect=fixed({"urgent": "n2"}, ["b"]),
    ),
    Scenario(
        "nominated-pod-counts",
        "a first preemptor stays nominated to n1 while its victim terminates; a second one cannot use "
        "n1 (the nominated pod counts there) and preempts on n2",
        (Node("n1", cpu="3"), Node("n2")),
        (
            Running("a1", "n1", 100, "3", 5, held=True),
            Running("b1", "n2", 100, "2", 50),
            Running("b2", "n2", 100, "2", 40),
        ),
        (Preemptor("first", cpu="3", held=True), Preemptor("second", cpu="1")),
        expect=fixed({"first": "n1", "second": "n2"}, ["a1", "b2"]),
    ),
    Scenario(
        "terminating-victim-no-second-preemption",
        "the victim keeps a finalizer: the preemptor stays nominated and preempts nothing more meanwhile",
        (Node("n1"), Node("n2")),
        (Running("a1", "n1", 100, "4", 5, held=True), Running("b1", "n2", 500, "4", 60)),
        (Preemptor("urgent", cpu="4", held=True),),
        expect=fixed({"urgent": "n1"}, ["a1"]),
    ),
    Scenario(
        "pdb-guarded-low-beside-higher",
        "each node: a PDB-guarded low pod beside a higher one; 1.28 reads the violating victim first "
        "(n1's lower), 1.32 on the most important (n2's lower)",
        (Node("n1"), Node("n2")),
        (
            Running("g1", "n1", 100, "2", 30, app="guarded"),
            Running("m1", "n1", 500, "2", 31),
            Running("g2", "n2", 200, "2", 32, app="guarded"),
            Running("m2", "n2", 300, "2", 33),
        ),
        URGENT,
        budgets=(Budget("guarded", 0),),
        expect=by_release(
            Expected({"urgent": "n1"}, frozenset({"g1", "m1"})), Expected({"urgent": "n2"}, frozenset({"g2", "m2"}))
        ),
    ),
)


def seeded(seed: int) -> Scenario:
    """3-4 full nodes of low- and mid-priority pods (distinct start times), sometimes a PDB, one preemptor."""
    rng = random.Random(seed)
    nodes = tuple(Node(f"n{i}") for i in range(1, rng.choice((3, 4)) + 1))
    ages = iter(rng.sample(range(1, 1000), 64))
    pods: list[Running] = []
    for node in nodes:
        free = 4
        while free:
            cpu = min(free, rng.choice((1, 1, 2)))
            priority = rng.choice((100, 200, 300, 400, 500))
            pods.append(Running(f"p{len(pods)}", node.name, priority, str(cpu), next(ages), app=rng.choice(APPS)))
            free -= cpu
    budgets = (Budget(rng.choice(APPS), rng.choice((0, 0, 1))),) if rng.random() < 0.6 else ()
    preemptor = Preemptor("urgent", cpu=str(rng.choice((1, 2, 3, 4))))
    return Scenario(f"seed-{seed}", f"random.Random({seed})", nodes, tuple(pods), (preemptor,), budgets)


SCENARIOS = (*WRITTEN, *(seeded(seed) for seed in range(1, 6)))
