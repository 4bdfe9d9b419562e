"""The preempt verb's engine: victims that also satisfy the extender, PDBs and leaving pods (the gang
rules: ``tests/unit/preemption/test_gangs.py``). Snapshots are built from k8s-shaped dicts
(``tests/unit/preemption/builders.py``).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field

import pytest

from extenders.model import PodInfo
from extenders.pdb import DisruptionBudgets, pdb_matches, split_by_pdb_violation
from extenders.preemption import RULE_UNKNOWN_NODE, RULE_UNKNOWN_VICTIM, importance_key
from extenders.sync.convert import pdb_info, pod_info
from tests.unit.preemption.builders import (
    POLICY,
    PREEMPTOR,
    Json,
    names,
    node,
    pdb,
    pod,
    process_preemption,
    snapshot,
    uids,
)
from tests.wire_captures import load_capture


# ------------------------------------------------------------------ table
@dataclass
class Case:
    id: str
    nodes: list[Json]
    pods: list[Json]
    candidates: dict[str, list[str]]  # node -> victim names, as kube-scheduler sent them
    expected: dict[str, tuple[list[str], int]]  # node -> (victim names, NumPDBViolations)
    pdbs: list[Json] = field(default_factory=list)
    preemptor: Json = field(default_factory=lambda: PREEMPTOR)


CASES = [
    Case(
        "scheduler-victims-suffice-listed-most-important-first",
        nodes=[node("n1", cpu="2", gpu=1)],
        pods=[pod("a", "n1", prio=20, cpu="600m"), pod("b", "n1", prio=10, cpu="600m")],
        candidates={"n1": ["b", "a"]},
        expected={"n1": (["a", "b"], 0)},
    ),
    Case(
        "equally-important-scheduler-victims-keep-their-order",
        nodes=[node("n1", cpu="2", gpu=1)],
        pods=[pod("a", "n1", prio=10, cpu="600m"), pod("b", "n1", prio=10, cpu="600m")],
        candidates={"n1": ["b", "a"]},
        expected={"n1": (["b", "a"], 0)},
    ),
    Case(
        "gpu-the-scheduler-ignores-adds-a-gpu-victim",
        nodes=[node("n1", cpu="2", gpu=1)],
        pods=[
            pod("cpu-hog", "n1", prio=10, cpu="1500m"),
            pod("gpu-user", "n1", prio=10, cpu="100m", gpu=1),
            pod("bystander", "n1", prio=10, cpu="100m"),
        ],
        candidates={"n1": ["cpu-hog"]},
        expected={"n1": (["cpu-hog", "gpu-user"], 0)},
    ),
    Case(
        "equal-priority-is-never-a-victim",
        nodes=[node("n1", cpu="4", gpu=1), node("n2", cpu="4", gpu=1)],
        pods=[
            pod("peer", "n1", prio=1000, gpu=1),
            pod("s1", "n1", prio=10, cpu="3"),
            pod("s2", "n2", prio=10, cpu="3"),
            pod("low-gpu", "n2", prio=999, gpu=1),
        ],
        candidates={"n1": ["s1"], "n2": ["s2"]},
        expected={"n2": (["low-gpu", "s2"], 0)},
    ),
    Case(
        "least-important-evicted-first-reprieve-by-priority-then-start",
        nodes=[node("n1", cpu="8", gpu=3)],
        pods=[
            pod("s", "n1", prio=10, cpu="100m"),
            pod("old", "n1", prio=50, gpu=1, start="2026-01-01T00:00:00Z"),
            pod("young", "n1", prio=50, gpu=1, start="2026-01-02T00:00:00Z"),
            pod("lowest", "n1", prio=5, gpu=1),
        ],
        preemptor=pod("high", prio=1000, gpu=2),
        candidates={"n1": ["s"]},
        # Reprieve order: old, young (same priority, later start), lowest: old stays.
        expected={"n1": (["young", "s", "lowest"], 0)},
    ),
    Case(
        "pdb-violating-pods-reprieved-first",
        nodes=[node("n1", cpu="8", gpu=3)],
        pods=[
            pod("s", "n1", prio=10),
            # Same priority; "guarded" started later, so without the PDB rule it would go first.
            pod("free", "n1", prio=10, gpu=1, start="2026-01-01T00:00:00Z"),
            pod("guarded", "n1", prio=10, gpu=1, labels={"app": "db"}, start="2026-01-05T00:00:00Z"),
            pod("lowest", "n1", prio=1, gpu=1),
        ],
        pdbs=[pdb("db", {"app": "db"}, 0)],
        preemptor=pod("high", prio=1000, gpu=2),
        candidates={"n1": ["s"]},
        # "free" started before "s" (no start time counts as starting now): more important.
        expected={"n1": (["free", "s", "lowest"], 0)},
    ),
    Case(
        "pdb-violation-counted-when-unavoidable",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[
            pod("s", "n1", prio=10),
            pod("g1", "n1", prio=10, gpu=1, labels={"app": "db"}),
            pod("g2", "n1", prio=10, gpu=1, labels={"app": "db"}),
        ],
        pdbs=[pdb("db", {"app": "db"}, 1)],
        preemptor=pod("high", prio=1000, gpu=2),
        candidates={"n1": ["s"]},
        expected={"n1": (["s", "g1", "g2"], 1)},
    ),
    Case(
        "pdb-budget-charged-most-important-first-scheduler-victims-included",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[
            pod("s", "n1", prio=10, labels={"app": "db"}),
            pod("g1", "n1", prio=10, gpu=1, labels={"app": "db"}, start="2026-01-02T00:00:00Z"),
            pod("other", "n1", prio=10, gpu=1, start="2026-01-01T00:00:00Z"),
        ],
        pdbs=[pdb("db", {"app": "db"}, 1)],
        candidates={"n1": ["s"]},
        # Charged in importance order (other, g1, s): g1 takes the only disruption, so s (the
        # scheduler's, never reprieved) is the violating one; "other" is reprieved first, g1 goes.
        expected={"n1": (["g1", "s"], 1)},
    ),
    Case(
        "pdb-in-other-namespace-or-empty-selector-matches-nothing",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10, labels={"app": "db"}), pod("g", "n1", prio=10, gpu=1, labels={"app": "db"})],
        pdbs=[pdb("elsewhere", {"app": "db"}, 0, ns="other"), pdb("empty", None, 0), pdb("all", {}, 0)],
        candidates={"n1": ["s"]},
        expected={"n1": (["s", "g"], 0)},
    ),
    Case(
        "scheduler-count-recomputed",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s1", "n1", prio=10, labels={"app": "db"}), pod("s2", "n1", prio=10, labels={"app": "db"})],
        pdbs=[pdb("db", {"app": "db"}, 0)],
        candidates={"n1": ["s1", "s2"]},
        expected={"n1": (["s1", "s2"], 2)},
    ),
    Case(
        "terminating-pod-frees-its-gpu-no-extra-victim",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10), pod("leaving", "n1", prio=10, gpu=1, deleting=True)],
        candidates={"n1": ["s"]},
        expected={"n1": (["s"], 0)},
    ),
    Case(
        "terminating-pod-never-added-as-victim",
        nodes=[node("n1", cpu="8", gpu=2)],
        pods=[
            pod("s", "n1", prio=10),
            pod("leaving", "n1", prio=10, gpu=1, deleting=True),
            pod("done", "n1", prio=10, gpu=1, phase="Succeeded"),
            pod("live", "n1", prio=10, gpu=1),
            pod("live2", "n1", prio=10, gpu=1),
        ],
        preemptor=pod("high", prio=1000, gpu=2),
        candidates={"n1": ["s"]},
        expected={"n1": (["s", "live", "live2"], 0)},
    ),
    Case(
        "terminating-scheduler-victim-kept-but-no-pdb-violation",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[
            pod("leaving", "n1", prio=10, labels={"app": "db"}, deleting=True),
            pod("s", "n1", prio=10, labels={"app": "db"}),
        ],
        pdbs=[pdb("db", {"app": "db"}, 0)],
        candidates={"n1": ["leaving", "s"]},
        expected={"n1": (["leaving", "s"], 1)},
    ),
    Case(
        "unknown-node-dropped",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10)],
        candidates={"ghost": ["s"], "n1": ["s"]},
        expected={"n1": (["s"], 0)},
    ),
    Case(
        "victim-not-on-that-node-drops-the-node",
        nodes=[node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)],
        pods=[pod("s1", "n1", prio=10), pod("s2", "n2", prio=10)],
        candidates={"n1": ["s1", "s2"], "n2": ["s2", "never-seen"]},
        expected={},
    ),
    Case(
        "cannot-fit-even-without-all-lower-priority-pods",
        # n1's GPU is held by a more important pod; n2 has no GPU at all.
        nodes=[node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=0)],
        pods=[
            pod("s1", "n1", prio=10),
            pod("low1", "n1", prio=10),
            pod("g", "n1", prio=2000, gpu=1),
            pod("s2", "n2", prio=10),
            pod("low2", "n2", prio=10),
        ],
        candidates={"n1": ["s1"], "n2": ["s2"]},
        expected={},
    ),
    Case(
        "fits-without-victims-but-none-listed-is-dropped",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("x", "n1", prio=10)],
        candidates={"n1": []},
        expected={},
    ),
    Case(
        "no-lower-priority-pod-left",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10), pod("peer", "n1", prio=1000, gpu=1)],
        candidates={"n1": ["s"]},
        expected={},
    ),
    Case(
        "duplicate-victim-uids-collapsed",
        nodes=[node("n1", cpu="8", gpu=1)],
        pods=[pod("s", "n1", prio=10)],
        candidates={"n1": ["s", "s"]},
        expected={"n1": (["s"], 0)},
    ),
]


def _run(case: Case, full_pods: bool) -> dict[str, tuple[list[str], int]]:
    snap = snapshot(case.nodes, case.pods, case.pdbs)
    before = {n: sorted(p.uid for p in i.pods.values()) for n, i in snap.nodes.items()}
    requested = {n: dict(i.requested) for n, i in snap.nodes.items()}
    by_name = {p["metadata"]["name"]: p for p in case.pods}
    victim_pods: dict[str, PodInfo] | None = None
    if full_pods:  # NodeNameToVictims: the full pods as kube-scheduler sent them
        victim_pods = {f"uid-{v}": pod_info(by_name[v]) for vs in case.candidates.values() for v in vs if v in by_name}
    result = process_preemption(
        POLICY,
        pod_info(case.preemptor),
        {n: uids(*vs) for n, vs in case.candidates.items()},
        snap,
        victim_pods=victim_pods,
    )
    # The snapshot is never mutated.
    assert {n: sorted(p.uid for p in i.pods.values()) for n, i in snap.nodes.items()} == before
    assert {n: dict(i.requested) for n, i in snap.nodes.items()} == requested
    # Every answered node has victims, all of them on that node.
    for name, meta in result.items():
        assert meta.uids
        assert all(u in snap.nodes[name].pods for u in meta.uids)
    return names(result)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.parametrize("full_pods", [False, True], ids=["meta-uids", "full-pods"])
def test_preemption_table(case: Case, full_pods: bool) -> None:
    assert _run(case, full_pods) == case.expected


def test_answer_keeps_candidate_order() -> None:
    nodes = [node(f"n{i}", cpu="8", gpu=1) for i in (3, 1, 2)]
    pods = [pod(f"s{i}", f"n{i}", prio=10) for i in (1, 2, 3)]
    snap = snapshot(nodes, pods)
    cands = {"n2": uids("s2"), "n3": uids("s3"), "n1": uids("s1")}
    result = process_preemption(POLICY, pod_info(PREEMPTOR), cands, snap)
    assert list(result) == ["n2", "n3", "n1"]


def test_preemption_policy_never_gets_no_candidates(caplog: pytest.LogCaptureFixture) -> None:
    snap = snapshot([node("n1", cpu="8", gpu=1)], [pod("s", "n1", prio=10)])
    never = pod_info(pod("high", prio=1000, gpu=1, policy="Never"))
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        assert process_preemption(POLICY, never, {"n1": uids("s")}, snap) == {}
    assert "preemptionPolicy Never" in caplog.text
    # The same pod with the default policy is accepted there.
    assert process_preemption(POLICY, pod_info(PREEMPTOR), {"n1": uids("s")}, snap)


def test_full_pod_on_another_node_drops_the_node(caplog: pytest.LogCaptureFixture) -> None:
    snap = snapshot([node("n1", cpu="8", gpu=1)], [pod("s", "n1", prio=10)])
    moved = pod_info(pod("s", "n9", prio=10))
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        out = process_preemption(POLICY, pod_info(PREEMPTOR), {"n1": uids("s")}, snap, victim_pods={"uid-s": moved})
    assert out == {}
    assert f"rule {RULE_UNKNOWN_VICTIM}" in caplog.text and "default/s" in caplog.text


def test_unknown_node_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    snap = snapshot([node("n1", cpu="8", gpu=1)], [pod("s", "n1", prio=10)])
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        out = process_preemption(POLICY, pod_info(PREEMPTOR), {"ghost": uids("s")}, snap)
    assert out == {}
    assert "dropped node ghost" in caplog.text and f"rule {RULE_UNKNOWN_NODE}" in caplog.text


# ------------------------------------------------------------------ PDB helpers and ordering
def test_pdb_budget_charges_every_matching_pdb() -> None:
    pdbs = [pdb_info(pdb("a", {"app": "x"}, 1)), pdb_info(pdb("b", {"tier": "t"}, 0))]
    p1 = pod_info(pod("p1", labels={"app": "x"}))
    p2 = pod_info(pod("p2", labels={"app": "x", "tier": "t"}))
    p3 = pod_info(pod("p3", labels={"app": "x"}))
    budgets = DisruptionBudgets(pdbs)
    assert [budgets.charge(p) for p in (p1, p2, p3)] == [False, True, True]
    violating, others = split_by_pdb_violation([p1, p2, p3], DisruptionBudgets(pdbs))
    assert [p.name for p in violating] == ["p2", "p3"] and [p.name for p in others] == ["p1"]
    assert not pdb_matches(pdbs[0], pod_info(pod("nolabels")))
    assert not pdb_matches(pdbs[0], pod_info(pod("ns", ns="other", labels={"app": "x"})))


def test_importance_order() -> None:
    pods = [
        pod_info(pod("no-start", prio=5)),
        pod_info(pod("late", prio=5, start="2026-02-01T00:00:00Z")),
        pod_info(pod("early", prio=5, start="2026-01-01T00:00:00+00:00")),
        pod_info(pod("high", prio=9)),
    ]
    assert [p.name for p in sorted(pods, key=importance_key)] == ["high", "early", "late", "no-start"]


# ------------------------------------------------------------------ captured kube-scheduler bodies
def _wire(name: str) -> Json:
    return load_capture(name)


def test_captured_full_victims_body() -> None:
    body = _wire("preempt-full-victims-pdb.json")
    victims = {
        p["metadata"]["uid"]: copy.deepcopy(p) for entry in body["NodeNameToVictims"].values() for p in entry["Pods"]
    }
    # The captured cluster: every node has 4 cpus and one GPU, held by a priority-100 pod that
    # kube-scheduler (which ignores the GPU) did not pick; the victims' PDB allows nothing.
    nodes, pods = [], list(victims.values())
    for name in body["NodeNameToVictims"]:
        nodes.append(node(name, cpu="4", gpu=1))
        pods.append(pod(f"gpu-{name}", name, prio=100, cpu="100m", gpu=1, start="2026-11-20T21:55:00Z"))
    snap = snapshot(nodes, pods, [pdb("protected", {"pdb": "protected"}, 0, ns="harness")])
    preemptor = pod_info(body["Pod"])
    cands = {n: [p["metadata"]["uid"] for p in e["Pods"]] for n, e in body["NodeNameToVictims"].items()}
    out = process_preemption(POLICY, preemptor, cands, snap, victim_pods={u: pod_info(p) for u, p in victims.items()})
    assert list(out) == list(cands)
    for name, meta in out.items():
        # Most important first: the GPU holder (priority 100, started) ranks after node-a's
        # priority-1000 victims and before every priority-100 victim without a start time.
        split = 2 if name == "node-a" else 0
        assert meta.uids == [*cands[name][:split], f"uid-gpu-{name}", *cands[name][split:]]
    # node-a's victim low-a-1 carries the pdb=protected label; the scheduler said 1 too.
    assert out["node-a"].num_pdb_violations == body["NodeNameToVictims"]["node-a"]["NumPDBViolations"] == 1
    assert all(out[n].num_pdb_violations == 0 for n in out if n != "node-a")


def test_captured_meta_victims_body_with_unknown_victims() -> None:
    body = _wire("preempt-meta-victims.json")
    meta = body["NodeNameToMetaVictims"]
    # The snapshot knows node-a's and node-b's victims but not node-c's (and no GPU is busy).
    nodes = [node(n, cpu="4", gpu=1) for n in meta]
    pods = []
    for name in ("node-a", "node-b"):
        for i, entry in enumerate(meta[name]["Pods"]):
            p = pod(f"{name}-v{i}", name, prio=100, cpu="500m")
            p["metadata"]["uid"] = entry["UID"]
            pods.append(p)
    snap = snapshot(nodes, pods)
    cands = {n: [p["UID"] for p in e["Pods"]] for n, e in meta.items()}
    out = process_preemption(POLICY, pod_info(body["Pod"]), cands, snap)
    assert {n: m.uids for n, m in out.items()} == {n: cands[n] for n in ("node-a", "node-b")}
