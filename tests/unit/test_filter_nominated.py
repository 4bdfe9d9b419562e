"""Fidelity to kube-scheduler's filter with nominated pods (``RunFilterPluginsWithNominatedPods``): pods
nominated to a node with at least the incoming pod's priority count as there, and the node must pass
with and without them. Builders are the preemption tests' (tests/unit/preemption/builders.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from extenders import engine
from extenders.equivalence import EquivalenceCache
from extenders.model import NodeInfo
from extenders.snapshot import Snapshot, index_nominated, patch_nominated
from extenders.sync.convert import pod_info
from tests.unit.preemption.builders import (
    POLICY,
    Json,
    node,
    nominated,
    pod,
    snapshot,
    with_affinity_to,
    with_spread,
)

CHECK_ALL = POLICY.model_copy(update={"always_check_all_predicates": True})


# ------------------------------------------------------------------ filter with nominated pods
@dataclass
class FilterCase:
    id: str
    nodes: list[Json]
    pods: list[Json]
    incoming: Json
    passing: list[str]
    failed: dict[str, str] = field(default_factory=dict)  # node -> a part of the reason
    unresolvable: dict[str, str] = field(default_factory=dict)


INCOMING = pod("in", prio=500, gpu=1)
FILTER_CASES = [
    FilterCase(
        "higher-priority-nominated-pod-takes-the-room",
        nodes=[node("n1", gpu=1), node("n2", gpu=1)],
        pods=[nominated("q", "n1", 1000, gpu=1)],
        incoming=INCOMING,
        passing=["n2"],
        failed={"n1": "example.com/gpu"},
    ),
    FilterCase(
        "equal-priority-nominated-pod-takes-the-room",
        nodes=[node("n1", gpu=1)],
        pods=[nominated("q", "n1", 500, gpu=1)],
        incoming=INCOMING,
        passing=[],
        failed={"n1": "example.com/gpu"},
    ),
    FilterCase(
        "lower-priority-nominated-pod-does-not",
        nodes=[node("n1", gpu=1)],
        pods=[nominated("q", "n1", 499, gpu=1)],
        incoming=INCOMING,
        passing=["n1"],
    ),
    FilterCase(
        "the-incoming-pod-nominated-there-is-not-counted",
        nodes=[node("n1", gpu=1)],
        pods=[nominated("in", "n1", 500, gpu=1)],
        incoming=nominated("in", "n1", 500, gpu=1),
        passing=["n1"],
    ),
    FilterCase(
        "a-nominated-pod-already-placed-there-counts-once",
        nodes=[node("n1", gpu=2)],
        pods=[pod("q", "n1", prio=1000, gpu=1), nominated("q", "n1", 1000, gpu=1)],
        incoming=INCOMING,
        passing=["n1"],
    ),
    FilterCase(
        "with-them-failing-is-the-reported-failure",
        # Without q the pod's affinity fails (unresolvable); with q it is met but the GPU is
        # short: kube-scheduler reports the first pass's failure, which preemption may resolve.
        nodes=[node("n1", gpu=1)],
        pods=[nominated("q", "n1", 1000, gpu=1, labels={"app": "x"})],
        incoming=with_affinity_to("x", pod("in", prio=500, gpu=1)),
        passing=[],
        failed={"n1": "example.com/gpu"},
    ),
    FilterCase(
        "must-pass-without-them-too",
        # q alone satisfies the affinity and leaves room: the node still fails, as q may go elsewhere.
        nodes=[node("n1", gpu=2)],
        pods=[nominated("q", "n1", 1000, gpu=1, labels={"app": "x"})],
        incoming=with_affinity_to("x", pod("in", prio=500, gpu=1)),
        passing=[],
        unresolvable={"n1": "affinity"},
    ),
    FilterCase(
        "an-empty-spread-selector-counts-the-nominated-pod",
        # PreFilter counts no pod with labelSelector {}, but AddPod counts every pod of the
        # namespace it adds: with q, n1 holds 1 against n2's 0, and 1 + 1 - 0 > maxSkew 1.
        nodes=[node("n1"), node("n2")],
        pods=[nominated("q", "n1", 1000)],
        incoming=with_spread({}, pod("in", prio=500)),
        passing=["n2"],
        failed={"n1": "topology spread"},
    ),
]


def _check(result: engine.FilterResult, case: FilterCase) -> None:
    assert result.passing == case.passing
    assert set(result.failed) == set(case.failed) and set(result.unresolvable) == set(case.unresolvable)
    for name, part in [*case.failed.items(), *case.unresolvable.items()]:
        reason = result.failed.get(name) or result.unresolvable.get(name) or ""
        assert part in reason, (name, reason)


@pytest.mark.parametrize("case", FILTER_CASES, ids=[c.id for c in FILTER_CASES])
def test_filter_counts_nominated_pods(case: FilterCase) -> None:
    snap = snapshot(case.nodes, case.pods)
    incoming = pod_info(case.incoming)
    names_ = [info.name for info in snap.nodes.values()]
    _check(engine.filter_nodes(POLICY, incoming, snap, names_), case)
    _check(engine.filter_nodes(CHECK_ALL, incoming, snap, names_), case)
    cache = EquivalenceCache()
    for _ in range(3):  # admitted on its second sighting: the cached path answers the same
        _check(engine.filter_nodes(POLICY, incoming, snap, names_, cache.memo(incoming)), case)


def test_filter_leaves_alone_nodes_it_was_not_asked_about() -> None:
    snap = snapshot([node("n1", gpu=1), node("n2", gpu=1)], [nominated("q", "n1", 1000, gpu=1)])
    result = engine.filter_nodes(POLICY, pod_info(INCOMING), snap, ["n2"])
    assert (result.passing, result.failed, result.unresolvable) == (["n2"], {}, {})


def test_an_empty_spread_selector_counts_removed_victims_below_zero() -> None:
    """RemovePod takes every removed pod of the namespace off an empty selector's count, though
    PreFilter counted none: n1 without its victim is at -1, so n2 (at 0) would reach a skew of 2."""
    snap = snapshot([node("n1"), node("n2")], [pod("v", "n1", prio=1), pod("w", "n2", prio=1)])
    incoming = pod_info(with_spread({}, pod("in", prio=500)))
    prepared = engine.PreparedPod.build(POLICY, incoming, snap)
    n1, n2 = snap.nodes["n1"], snap.nodes["n2"]
    assert prepared.first_failure(n1) is None and prepared.first_failure(n2) is None
    lighter = NodeInfo.build("n1", n1.node, [], n1.generation)
    without_victim = prepared.with_node(lighter)
    assert without_victim.first_failure(lighter) is None
    failure = without_victim.first_failure(n2)
    assert failure is not None and "topology spread" in failure.reason
    # Another namespace's pod is not counted on that path either.
    elsewhere = snapshot([node("n1"), node("n2")], [pod("v", "n1", prio=1, ns="other")])
    prepared = engine.PreparedPod.build(POLICY, incoming, elsewhere)
    lighter = NodeInfo.build("n1", elsewhere.nodes["n1"].node, [], 0)
    assert prepared.with_node(lighter).first_failure(elsewhere.nodes["n2"]) is None


# ------------------------------------------------------------------ the nominated index
def test_nominated_index_is_built_once_per_sealed_snapshot_and_patched_forward() -> None:
    q, plain = pod_info(nominated("q", "n1", 10)), pod_info(pod("plain", prio=10))
    pending = {p.uid: p for p in (q, plain)}
    sealed = Snapshot(pending=pending, sealed=True)
    first = sealed.nominated()
    assert {n: [p.name for p in ps] for n, ps in first.items()} == {"n1": ["q"]}
    assert sealed.nominated() is first
    unsealed = Snapshot(pending=pending)
    assert unsealed.nominated() is not unsealed.nominated()  # unsealed: scanned on every call
    assert Snapshot().nominated() == {}
    # The replica cache patches the index with the changed uids only.
    r = pod_info(nominated("r", "n2", 10))
    moved = dataclasses.replace(q, nominated_node_name="n2")
    after = {q.uid: moved, plain.uid: plain, r.uid: r}
    patched = patch_nominated(first, pending, after, [q.uid, r.uid])
    assert patched == index_nominated(after.values())
    assert {n: sorted(p.name for p in ps) for n, ps in patched.items()} == {"n2": ["q", "r"]}
    assert patch_nominated(first, pending, pending, [plain.uid]) is first  # nothing nominated changed
    gone = patch_nominated(first, pending, {plain.uid: plain}, [q.uid])
    assert gone == {}


def test_nominated_to_add_picks_what_the_pod_must_yield_to() -> None:
    snap = snapshot(
        [node("n1", gpu=4)],
        [
            pod("placed", "n1", prio=10),
            nominated("placed", "n1", 900),
            nominated("low", "n1", 499),
            nominated("equal", "n1", 500),
            nominated("high", "n1", 900),
            nominated("in", "n1", 900),
        ],
    )
    picked = engine.nominated_to_add(pod_info(INCOMING), snap.nodes["n1"], snap.nominated(), snap)
    assert sorted(p.name for p in picked) == ["equal", "high"]


def test_only_the_pods_own_scheduler_and_unplaced_nominations_count() -> None:
    """kube-scheduler's nominator holds its own queue's pods, and drops a nomination when it assumes the pod."""
    other = nominated("other", "n1", 900)
    other["spec"]["schedulerName"] = "default-scheduler"
    mine = nominated("mine", "n1", 900)
    mine["spec"]["schedulerName"] = "gang-scheduler"
    moved = nominated("moved", "n1", 900)
    moved["spec"]["schedulerName"] = "gang-scheduler"
    snap = snapshot([node("n1", gpu=4), node("n2", gpu=4)], [other, mine, moved])
    reserved = dataclasses.replace(snap.pending["uid-moved"], node_name="n2", assumed=True)
    snap.nodes["n2"].add_pod(reserved)  # our bind reserved it elsewhere; the watch has not confirmed it yet
    incoming = pod_info(pod("in", prio=500))
    incoming.scheduler_name = "gang-scheduler"
    picked = engine.nominated_to_add(incoming, snap.nodes["n1"], snap.nominated(), snap)
    assert [p.name for p in picked] == ["mine"]
    # A pod without a schedulerName is the default scheduler's.
    default = pod_info(pod("in", prio=500))
    assert [p.name for p in engine.nominated_to_add(default, snap.nodes["n1"], snap.nominated(), snap)] == ["other"]


def test_explain_judges_a_node_with_the_pods_nominated_to_it_as_filter_does() -> None:
    snap = snapshot([node("n1", gpu=1), node("n2", gpu=1)], [nominated("q", "n1", 1000, gpu=1)])
    incoming = pod_info(INCOMING)
    result = engine.filter_nodes(POLICY, incoming, snap, ["n1", "n2"])
    explained = engine.explain(POLICY, incoming, snap, ["n1", "n2"])["nodes"]
    assert result.passing == ["n2"] and explained["n2"]["fit"] is True and explained["n2"]["nominated_pods"] == []
    n1 = explained["n1"]
    assert n1["fit"] is False and n1["nominated_pods"] == ["default/q"]
    assert n1["first_failure"]["reason"] == result.failed["n1"]
    assert n1["first_failure"]["plugin"] == "NodeResourcesFit"
