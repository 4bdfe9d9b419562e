"""Fidelity to kube-scheduler's DefaultPreemption: PDB accounting and victim order.

The expectations follow the upstream semantics: ``filterPodsWithPDBViolation`` (each PDB from
``disruptionsAllowed``, pods in ``disruptedPods`` not charged, every potential victim classed
most important first), ``SelectVictimsOnNode``'s count of violating victims and ``MoreImportantPod``
for the victims' order. Builders are the preemption tests': UIDs are ``uid-<name>``, and
``example.com/gpu`` is a resource only the extender counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import pytest

from extenders.model import PodInfo
from extenders.pdb import DisruptionBudgets
from extenders.sync.convert import pdb_info, pod_info
from extenders.sync.kinds import PDBS
from extenders.sync.records import PDB, POD, reserved_pod
from tests.unit.preemption.builders import (
    POLICY,
    Json,
    names,
    node,
    nominated,
    pdb,
    pod,
    process_preemption,
    snapshot,
    uids,
    with_disrupted,
)


# ------------------------------------------------------------------ preemption
@dataclass
class Case:
    id: str
    nodes: list[Json]
    pods: list[Json]
    candidates: dict[str, list[str]]
    expected: dict[str, tuple[list[str], int]]  # node -> (victims in answer order, NumPDBViolations)
    pdbs: list[Json] = field(default_factory=list)
    preemptor: Json = field(default_factory=lambda: pod("high", prio=1000, cpu="1", gpu=1))


PREEMPTION_CASES = [
    # --- PDBs: status.disruptedPods
    Case(
        "disrupted-pod-is-not-charged",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10, labels={"app": "db"}), pod("t", "n2", prio=10, labels={"app": "db"})],
        pdbs=[with_disrupted(pdb("db", {"app": "db"}, 0), "s")],
        candidates={"n1": ["s"]},
        expected={"n1": (["s"], 0)},
    ),
    Case(
        "disrupted-pod-leaves-the-budget-to-the-next",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("a", "n1", prio=10, labels={"app": "db"}), pod("b", "n1", prio=10, labels={"app": "db"})],
        pdbs=[with_disrupted(pdb("db", {"app": "db"}, 1), "a")],
        candidates={"n1": ["a", "b"]},
        expected={"n1": (["a", "b"], 0)},
    ),
    Case(
        "undisrupted-pods-are-still-charged",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("a", "n1", prio=10, labels={"app": "db"}), pod("b", "n1", prio=10, labels={"app": "db"})],
        pdbs=[with_disrupted(pdb("db", {"app": "db"}, 1), "somebody-else")],
        candidates={"n1": ["a", "b"]},
        expected={"n1": (["a", "b"], 1)},
    ),
    # --- PDBs: classed once over every potential victim; a violating victim stays counted
    Case(
        "violation-counted-though-the-pod-charged-before-it-is-reprieved",
        # The budget allows one: "keep" (more important) takes it, so "gpu" is classed violating
        # and reprieved first; it holds the GPU and goes. "keep" is then reprieved, yet "gpu"
        # still counts as a violation, as kube-scheduler counts it.
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[
            pod("s", "n1", prio=5),
            pod("keep", "n1", prio=20, labels={"app": "db"}),
            pod("gpu", "n1", prio=10, gpu=1, labels={"app": "db"}),
        ],
        pdbs=[pdb("db", {"app": "db"}, 1)],
        candidates={"n1": ["s"]},
        expected={"n1": (["gpu", "s"], 1)},
    ),
    # --- victims most important first
    Case(
        "added-victim-more-important-than-the-schedulers-comes-first",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=5), pod("gpu-user", "n1", prio=50, gpu=1)],
        candidates={"n1": ["s"]},
        expected={"n1": (["gpu-user", "s"], 0)},
    ),
    Case(
        "equal-priority-earlier-start-first",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[
            pod("s", "n1", prio=10, start="2026-01-03T00:00:00Z"),
            pod("gpu-user", "n1", prio=10, gpu=1, start="2026-01-01T00:00:00Z"),
        ],
        candidates={"n1": ["s"]},
        expected={"n1": (["gpu-user", "s"], 0)},
    ),
    Case(
        "scheduler-victims-reordered",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("low", "n1", prio=1), pod("mid", "n1", prio=5), pod("top", "n1", prio=9)],
        candidates={"n1": ["low", "top", "mid"]},
        expected={"n1": (["top", "mid", "low"], 0)},
    ),
    # --- nominated pods
    Case(
        "nominated-pod-keeps-its-room-an-extra-victim-goes",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[pod("a", "n1", prio=10, gpu=1), pod("b", "n1", prio=10, gpu=1), nominated("q", "n1", 2000, gpu=1)],
        candidates={"n1": ["a"]},
        expected={"n1": (["a", "b"], 0)},
    ),
    Case(
        "nominated-pod-of-equal-priority-counts",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[pod("a", "n1", prio=10, gpu=1), pod("b", "n1", prio=10, gpu=1), nominated("q", "n1", 1000, gpu=1)],
        candidates={"n1": ["a"]},
        expected={"n1": (["a", "b"], 0)},
    ),
    Case(
        "nominated-room-that-cannot-be-made-drops-the-node",
        nodes=[node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)],
        pods=[
            pod("a", "n1", prio=10, gpu=1),
            nominated("q", "n1", 2000, gpu=1),
            pod("b", "n2", prio=10, gpu=1),
        ],
        candidates={"n1": ["a"], "n2": ["b"]},
        expected={"n2": (["b"], 0)},
    ),
    Case(
        "lower-priority-nominated-pod-ignored",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[pod("a", "n1", prio=10, gpu=1), pod("b", "n1", prio=10, gpu=1), nominated("q", "n1", 999, gpu=1)],
        candidates={"n1": ["a"]},
        expected={"n1": (["a"], 0)},
    ),
    Case(
        "nominated-elsewhere-ignored",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[pod("a", "n1", prio=10, gpu=1), pod("b", "n1", prio=10, gpu=1), nominated("q", "n9", 2000, gpu=1)],
        candidates={"n1": ["a"]},
        expected={"n1": (["a"], 0)},
    ),
    Case(
        "the-preemptor-nominated-there-itself-is-ignored",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[pod("a", "n1", prio=10, gpu=1), pod("b", "n1", prio=10, gpu=1), nominated("high", "n1", 1000, gpu=1)],
        candidates={"n1": ["a"]},
        expected={"n1": (["a"], 0)},
    ),
]


@pytest.mark.parametrize("case", PREEMPTION_CASES, ids=[c.id for c in PREEMPTION_CASES])
def test_preemption_fidelity(case: Case) -> None:
    snap = snapshot(case.nodes, case.pods, case.pdbs)
    preemptor = pod_info(case.preemptor)
    out = process_preemption(POLICY, preemptor, {n: uids(*vs) for n, vs in case.candidates.items()}, snap)
    assert names(out) == case.expected


# ------------------------------------------------------------------ PDB budgets and records
def test_budget_skips_disrupted_pods_per_pdb() -> None:
    pdbs = [
        pdb_info(with_disrupted(pdb("a", {"app": "x"}, 0), "p1")),
        pdb_info(pdb("b", {"tier": "t"}, 0)),
    ]
    p1 = pod_info(pod("p1", labels={"app": "x", "tier": "t"}))
    p2 = pod_info(pod("p2", labels={"app": "x"}))
    budgets = DisruptionBudgets(pdbs)
    copy = budgets.copy()
    # p1 is not charged to "a" (listed there) but is to "b" (not listed there).
    assert [budgets.charge(p) for p in (p1, p2)] == [True, True]
    assert copy.charge(p2) is True and copy.charge(pod_info(pod("p3", labels={"tier": "t"}))) is True
    assert DisruptionBudgets(pdbs[:1]).charge(p1) is False


def test_nominated_node_name_is_read_for_unbound_pods_and_round_trips() -> None:
    pending = pod_info(nominated("q", "n1", 10))
    assert pending.nominated_node_name == "n1"
    assert POD.decode(orjson.loads(POD.dumps(pending))) == pending
    assert POD.encode(pending)["nom"] == "n1"
    bound = pod("b", "n2", prio=10)
    bound["status"]["nominatedNodeName"] = "n1"
    assert pod_info(bound).nominated_node_name == ""
    assert "nom" not in POD.encode(pod_info(bound))
    # A reservation places the pod: its record no longer carries the nomination.
    assert POD.loads(reserved_pod(pending, "n1")).nominated_node_name == ""


def test_disrupted_pods_are_read_and_round_trip() -> None:
    info = pdb_info(with_disrupted(pdb("db", {"app": "db"}, 1), "web-2", "web-1"))
    assert info.disrupted_pods == frozenset({"web-1", "web-2"})
    record = PDB.encode(info)
    assert record["dp"] == ["web-1", "web-2"]
    assert PDB.decode(orjson.loads(orjson.dumps(record)), namespace=info.namespace, name=info.name) == info
    plain = pdb_info(pdb("db", {"app": "db"}, 1))
    assert plain.disrupted_pods == frozenset() and "dp" not in PDB.encode(plain)
    assert PDBS.decode(plain.key, PDB.dumps(plain)) == plain


def test_full_victim_pods_are_ordered_like_uids() -> None:
    """The NodeNameToVictims form orders by the same keys as the UID form."""
    snap = snapshot([node("n1", cpu="8", gpu=1)], [pod("low", "n1", prio=1), pod("top", "n1", prio=9)])
    full: dict[str, PodInfo] = {u: snap.nodes["n1"].pods[u] for u in uids("low", "top")}
    preemptor = pod_info(pod("high", prio=1000, gpu=1))
    out = process_preemption(POLICY, preemptor, {"n1": uids("low", "top")}, snap, victim_pods=full)
    assert names(out) == {"n1": (["top", "low"], 0)}
