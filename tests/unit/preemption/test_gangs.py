"""The gang rules of the preempt verb (extenders/preemption/gangs.py): a gang is one victim, taken whole
or not at all, and a gang member preempts only when its gang can then complete."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from extenders.gang import gang_of_for
from extenders.gang.eviction import GangEviction
from extenders.model import NodeInfo, PodInfo
from extenders.policy import default_policy
from extenders.preemption import (
    RULE_GANG_ASSEMBLING,
    RULE_GANG_AVOIDABLE,
    RULE_GANG_NOT_BEST,
    RULE_GANG_NOT_LOWER,
    Preemption,
    process_preemption,
)
from extenders.preemption.inflight import with_leaving, without_pods
from extenders.snapshot import Snapshot
from extenders.sync.convert import pod_info
from tests.unit.preemption.builders import PREEMPTOR, gang_pod, names, node, pdb, pod, snapshot

POLICY = default_policy()


def preempt(preemptor: dict[str, Any], candidates: dict[str, list[str]], snap: Snapshot) -> Preemption:
    return process_preemption(POLICY, pod_info(preemptor), candidates, snap, gang_of=gang_of_for(snap))


def test_a_member_that_breaks_its_gang_takes_the_gang_whole() -> None:
    # Gang a (min 3): two members on n1, one on n2. The preemptor needs n1's GPU, held by a-1.
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 3), gang_pod("a-2", "n1", "a", 3, gpu=0), gang_pod("a-3", "n2", "a", 3, gpu=0)]
    result = preempt(PREEMPTOR, {"n1": ["uid-a-1"]}, snapshot(nodes, pods))
    # Its other member on n1 joins the victims; the one on n2 is the extender's to evict afterwards.
    assert names(result.nodes) == {"n1": (["a-1", "a-2"], 0)}
    assert result.gang_evictions == [
        GangEviction("default/a", "n1", "default/high", ("uid-a-1", "uid-a-2"), (("uid-a-3", "default/a-3"),), 3)
    ]


def test_a_gang_that_keeps_its_minimum_loses_only_the_victim() -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 2), gang_pod("a-2", "n2", "a", 2, gpu=0), gang_pod("a-3", "n2", "a", 2, gpu=0)]
    result = preempt(PREEMPTOR, {"n1": ["uid-a-1"]}, snapshot(nodes, pods))
    assert names(result.nodes) == {"n1": (["a-1"], 0)} and result.gang_evictions == []


def test_a_victim_another_preemption_is_evicting_counts_as_gone_so_the_gang_is_seen_broken() -> None:
    # Gang a (min 3) has four members, one per node. A first preemption took a-1 on n1 (kube-scheduler
    # evicts it asynchronously: the snapshot still has it). Taking a-2 on n2 now leaves two of three.
    nodes = [node(f"n{i}", cpu="8", gpu=1) for i in range(1, 5)]
    pods = [gang_pod(f"a-{i}", f"n{i}", "a", 3) for i in range(1, 5)]
    snap = snapshot(nodes, pods)
    blind = preempt(PREEMPTOR, {"n2": ["uid-a-2"]}, snap)
    assert blind.gang_evictions == [], "three of four left: whole enough, as far as the snapshot tells"
    seen = preempt(PREEMPTOR, {"n2": ["uid-a-2"]}, with_leaving(snap, {"uid-a-1"}))
    assert names(seen.nodes) == {"n2": (["a-2"], 0)}
    (eviction,) = seen.gang_evictions
    assert (eviction.gang, eviction.node, eviction.trigger, eviction.minimum) == ("default/a", "n2", ("uid-a-2",), 3)
    assert sorted(uid for uid, _ in eviction.members) == ["uid-a-3", "uid-a-4"]


def test_a_gang_broken_only_by_a_member_being_evicted_relies_on_that_members_record() -> None:
    # Gang a (min 2): a-1 on n1, a-2 on n2. An earlier answer took a-1 on n1 (the gang whole: a record
    # a|n1 with a-2 to follow) and kube-scheduler is evicting it. Taking a-2 now records nothing new,
    # but the answer relies on a-1 going: the record a|n1 is named, so it takes a-1 should that fail.
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 2), gang_pod("a-2", "n2", "a", 2)]
    snap = snapshot(nodes, pods)
    seen = preempt(PREEMPTOR, {"n2": ["uid-a-2"]}, with_leaving(snap, {"uid-a-1"}))
    assert names(seen.nodes) == {"n2": (["a-2"], 0)}
    assert seen.gang_evictions == [] and seen.relied == ["default/a|n1"]
    # Seen without the mark, the gang goes whole by this answer's own record and relies on nothing.
    blind = preempt(PREEMPTOR, {"n2": ["uid-a-2"]}, snap)
    assert [(e.node, e.trigger) for e in blind.gang_evictions] == [("n2", ("uid-a-2",))] and blind.relied == []
    # a-1 really deleted (not only marked): broken by that, nothing to rely on.
    deleted = snapshot(
        nodes, [dict(pods[0], metadata={**pods[0]["metadata"], "deletionTimestamp": "2026-11-29T00:00:00Z"}), pods[1]]
    )
    gone = preempt(PREEMPTOR, {"n2": ["uid-a-2"]}, deleted)
    assert gone.gang_evictions == [] and gone.relied == []


def test_a_member_an_earlier_answer_offered_elsewhere_counts_as_maybe_gone() -> None:
    # Gang a (min 4) has five members, one per node; a plain pod holds n6. A first preemptor was answered
    # n1 (a-1) and n6 (plain): kube-scheduler picked one, unknown to us, and evicts after its cycle.
    # The next preemptor's candidates are n2 (a-2) and n6: taking a-2 may leave three of four.
    nodes = [node(f"n{i}", cpu="8", gpu=1) for i in range(1, 7)]
    pods = [*(gang_pod(f"a-{i}", f"n{i}", "a", 4) for i in range(1, 6)), pod("plain", "n6", prio=10, gpu=1)]
    snap = snapshot(nodes, pods)
    offered = {"uid-a-1", "uid-plain"}
    candidates = {"n2": ["uid-a-2"], "n6": ["uid-plain"]}

    def answer(departed: set[str], chosen: dict[str, list[str]]) -> Preemption:
        return process_preemption(
            POLICY, pod_info(PREEMPTOR), chosen, snap, gang_of=gang_of_for(snap), departed=departed
        )

    assert list(answer(set(), candidates).nodes) == ["n2", "n6"], "blind: neither breaks the gang"
    assert list(answer(offered, candidates).nodes) == ["n6"], "the candidate that surely breaks no gang"
    # n2 alone: the gang goes whole; the evictor takes the rest only if a-1 did go (it counts what went).
    alone = answer(offered, {"n2": ["uid-a-2"]})
    assert names(alone.nodes) == {"n2": (["a-2"], 0)}
    (eviction,) = alone.gang_evictions
    assert (eviction.trigger, eviction.minimum) == (("uid-a-2",), 4)
    assert sorted(uid for uid, _ in eviction.members) == ["uid-a-1", "uid-a-3", "uid-a-4", "uid-a-5"]


def test_a_member_held_at_bind_while_its_gang_assembles_is_not_a_victim(caplog: pytest.LogCaptureFixture) -> None:
    # Gang a (min 3): a-1 and a-2 are held at bind on n1 and n2 (reserved, not yet bound), a-3 is on its
    # way. The gang may be permitted and bound whole before kube-scheduler evicts a-1: n1 is dropped,
    # and a node with a plain victim is kept.
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1), node("n3", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 3), gang_pod("a-2", "n2", "a", 3), pod("plain", "n3", prio=10, gpu=1)]
    snap = snapshot(nodes, pods)
    for name in ("n1", "n2"):
        info = snap.nodes[name]
        snap.nodes[name] = NodeInfo.build(
            name, info.node, [dataclasses.replace(p, assumed=True) for p in info.pods.values()]
        )
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        result = preempt(PREEMPTOR, {"n1": ["uid-a-1"], "n3": ["uid-plain"]}, snap)
    assert names(result.nodes) == {"n3": (["plain"], 0)} and result.gang_evictions == []
    assert f"dropped node n1 (rule {RULE_GANG_ASSEMBLING})" in caplog.text
    # Bound rather than held, the same two members are a gang already broken: a-1 may go.
    bound = preempt(PREEMPTOR, {"n1": ["uid-a-1"]}, snapshot(nodes, pods))
    assert names(bound.nodes) == {"n1": (["a-1"], 0)}


def test_with_leaving_marks_only_placed_live_pods_and_leaves_the_snapshot_alone() -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 2), gang_pod("a-2", "n2", "a", 2)]
    snap = snapshot(nodes, pods)
    assert with_leaving(snap, set()) is snap and with_leaving(snap, {"uid-unknown"}) is snap
    view = with_leaving(snap, {"uid-a-1"})
    assert view.nodes["n1"].pods["uid-a-1"].terminating and not snap.nodes["n1"].pods["uid-a-1"].terminating
    assert view.nodes["n2"] is snap.nodes["n2"]
    assert with_leaving(view, {"uid-a-1"}) is view  # already leaving


def test_without_pods_drops_only_the_named_pods_on_their_node() -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 2), gang_pod("a-2", "n2", "a", 2), pod("plain", "n1", prio=10, gpu=0)]
    snap = snapshot(nodes, pods)
    # a-2 named on the wrong node stays: only what the answer offered there counts.
    view = without_pods(snap, {"n1": {"uid-a-1"}, "n2": {"uid-a-1"}})
    assert set(view.nodes["n1"].pods) == {"uid-plain"} and set(snap.nodes["n1"].pods) == {"uid-a-1", "uid-plain"}
    assert view.nodes["n2"] is snap.nodes["n2"]


def test_a_gang_with_a_member_of_the_preemptors_priority_cannot_go_and_neither_can_the_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [gang_pod("a-1", "n1", "a", 2, prio=10), gang_pod("a-2", "n2", "a", 2, gpu=0, prio=1000)]
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        result = preempt(PREEMPTOR, {"n1": ["uid-a-1"]}, snapshot(nodes, pods))
    assert result.nodes == {} and result.gang_evictions == []
    assert f"dropped node n1 (rule {RULE_GANG_NOT_LOWER})" in caplog.text


def test_when_every_candidate_breaks_a_gang_the_cheapest_whole_is_the_only_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # n1's GPU: one member of gang a (priority 50, 2 members). n2's GPU: one member of gang b
    # (priority 10, 3 members over two nodes). kube-scheduler would compare one victim with one
    # victim; a gang is one victim with its priority, so b, the lower, is taken.
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1), node("n3", cpu="8")]
    pods = [
        gang_pod("a-1", "n1", "a", 2, prio=50),
        gang_pod("a-2", "n3", "a", 2, prio=50, gpu=0),
        gang_pod("b-1", "n2", "b", 3, prio=10),
        gang_pod("b-2", "n3", "b", 3, prio=10, gpu=0),
        gang_pod("b-3", "n3", "b", 3, prio=10, gpu=0),
    ]
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        result = preempt(PREEMPTOR, {"n1": ["uid-a-1"], "n2": ["uid-b-1"]}, snapshot(nodes, pods))
    assert names(result.nodes) == {"n2": (["b-1"], 0)}
    assert [(e.gang, sorted(e.members)) for e in result.gang_evictions] == [
        ("default/b", [("uid-b-2", "default/b-2"), ("uid-b-3", "default/b-3")])
    ]
    assert f"dropped node n1 (rule {RULE_GANG_NOT_BEST})" in caplog.text


def test_a_gang_guarded_by_a_pdb_is_taken_only_when_no_other_whole_would_do() -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1), node("n3", cpu="8")]
    pods = [
        gang_pod("a-1", "n1", "a", 2, labels_extra={"guarded": "yes"}),
        gang_pod("a-2", "n3", "a", 2, gpu=0, labels_extra={"guarded": "yes"}),
        gang_pod("b-1", "n2", "b", 2),
        gang_pod("b-2", "n3", "b", 2, gpu=0),
    ]
    guarded = [pdb("guard", {"guarded": "yes"}, 0)]
    result = preempt(PREEMPTOR, {"n1": ["uid-a-1"], "n2": ["uid-b-1"]}, snapshot(nodes, pods, guarded))
    assert list(result.nodes) == ["n2"] and [e.gang for e in result.gang_evictions] == ["default/b"]
    alone = preempt(PREEMPTOR, {"n1": ["uid-a-1"]}, snapshot(nodes, pods, guarded))
    assert names(alone.nodes) == {"n1": (["a-1"], 1)} and [e.gang for e in alone.gang_evictions] == ["default/a"]


def test_a_gang_member_preempts_only_when_its_gang_can_then_complete(caplog: pytest.LogCaptureFixture) -> None:
    # Gang h (min 3, priority 1000) is pending; each node's GPU is held by a plain low-priority pod.
    members = [gang_pod(f"h-{i}", "", "h", 3, prio=1000) for i in range(3)]
    low = [pod(f"low-{i}", f"n{i}", prio=10, gpu=1) for i in range(3)]
    two = snapshot([node("n0", gpu=1), node("n1", gpu=1)], [*members, *low[:2]])
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        result = preempt(members[0], {"n0": ["uid-low-0"]}, two)
    assert result.nodes == {}, "two nodes could hold two of the three members: evicting helps nobody"
    assert "gang default/h needs 3 more member(s) placed" in caplog.text and "room for 2" in caplog.text
    three = snapshot([node(f"n{i}", gpu=1) for i in range(3)], [*members, *low])
    assert names(preempt(members[0], {"n0": ["uid-low-0"]}, three).nodes) == {"n0": (["low-0"], 0)}


def test_a_gang_member_makes_room_for_its_siblings_too_where_the_node_can_hold_them() -> None:
    # Gang h (min 3, pending) and one node of 3 GPUs, each held by a low-priority pod. kube-scheduler
    # proposes room for one member; the gang needs three: all three holders go in one preemption.
    members = [gang_pod(f"h-{i}", "", "h", 3, prio=1000) for i in range(3)]
    low = [pod(f"low-{i}", "n1", prio=10, gpu=1) for i in range(3)]
    snap = snapshot([node("n1", cpu="8", gpu=3)], [*members, *low])
    result = preempt(members[0], {"n1": ["uid-low-0"]}, snap)
    assert names(result.nodes) == {"n1": (["low-0", "low-1", "low-2"], 0)}
    # A plain pod of the same shape takes only what it needs.
    assert names(preempt(PREEMPTOR, {"n1": ["uid-low-0"]}, snap).nodes) == {"n1": (["low-0"], 0)}
    # Two of the three members placed already: room for the last one only.
    placed = [gang_pod(f"h-{i}", "n2", "h", 3, prio=1000, gpu=0) for i in (1, 2)]
    snap = snapshot([node("n1", cpu="8", gpu=3), node("n2", cpu="8")], [members[0], *placed, *low])
    assert names(preempt(members[0], {"n1": ["uid-low-0"]}, snap).nodes) == {"n1": (["low-0"], 0)}


def test_victims_all_deleted_since_an_earlier_answer_named_them_leave_no_candidate_where_the_pod_fits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # kube-scheduler (1.33 on) evicts asynchronously and may preempt again before its cache drops the
    # victims, for this pod or another one: n1 again, with low-1 that our snapshot already lost.
    nodes = [node("n1", cpu="8", gpu=2), node("n2", cpu="8", gpu=1)]
    pods = [pod("low-2", "n1", prio=10, gpu=1), pod("other", "n2", prio=10, gpu=1)]
    snap = snapshot(nodes, pods)
    candidates = {"n2": ["uid-other"], "n1": ["uid-low-1"]}
    stale = preempt(PREEMPTOR, candidates, snap)
    assert names(stale.nodes) == {"n2": (["other"], 0)}, "a victim we never named: our view may be behind"
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        retried = process_preemption(
            POLICY, pod_info(PREEMPTOR), candidates, snap, gang_of=gang_of_for(snap), departed={"uid-low-1"}
        )
    # The pod fits on n1 now: evicting "other" on n2 would be for nothing, and naming low-1 again would
    # delete nothing (no event to move the pod on).
    assert retried.nodes == {} and retried.freed == "n1", caplog.text
    assert "victims-already-gone" in caplog.text
    # Where the pod does not fit once they are gone, the node still needs victims of its own.
    full = snapshot(nodes, [*pods, pod("low-3", "n1", prio=10, gpu=1)])
    crowded = process_preemption(
        POLICY, pod_info(PREEMPTOR), candidates, full, gang_of=gang_of_for(full), departed={"uid-low-1"}
    )
    assert crowded.freed == "" and names(crowded.nodes) == {"n2": (["other"], 0), "n1": (["low-3"], 0)}


def test_a_member_nominated_after_its_preemption_counts_as_placed_for_its_siblings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Gang h (min 3) is pending; h-0 was nominated to n0 by its preemption, whose victim low-0 is still
    # there (kube-scheduler 1.33 on evicts after the cycle). Its siblings need two nodes, not three.
    members = [gang_pod(f"h-{i}", "", "h", 3, prio=1000) for i in range(3)]
    members[0]["status"]["nominatedNodeName"] = "n0"
    low = [pod(f"low-{i}", f"n{i}", prio=10, gpu=1) for i in range(3)]
    snap = snapshot([node(f"n{i}", gpu=1) for i in range(3)], [*members, *low])
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        result = preempt(members[1], {"n1": ["uid-low-1"]}, snap)
    assert names(result.nodes) == {"n1": (["low-1"], 0)}, caplog.text
    # A nomination to a node since filled by a pod of the members' own priority keeps nothing: three
    # members need room again, and only n1 and n2 could give it.
    high = [pod("high-0", "n0", prio=1000, gpu=1), *low[1:]]
    taken = snapshot([node(f"n{i}", gpu=1) for i in range(3)], [*members, *high])
    assert preempt(members[1], {"n1": ["uid-low-1"]}, taken).nodes == {}
    # Without the nomination the same count says three members still need room, and there are three.
    del members[0]["status"]["nominatedNodeName"]
    fresh = snapshot([node(f"n{i}", gpu=1) for i in range(3)], [*members, *low])
    assert names(preempt(members[1], {"n1": ["uid-low-1"]}, fresh).nodes) == {"n1": (["low-1"], 0)}
    # With only two nodes and no nomination, nothing helps: two nodes for three members.
    two = snapshot([node(f"n{i}", gpu=1) for i in range(2)], [*members, *low[:2]])
    assert preempt(members[1], {"n1": ["uid-low-1"]}, two).nodes == {}


# ------------------------------------------------------------------ through the verb's nodes alone
def _gang_snapshot() -> Snapshot:
    """Gangs g (min 2, 3 bound) and h (min 2, 3 bound) each hold n1's / n2's / n3's GPU;
    k (min 1, 1 bound) holds most of n3's cpu; a plain pod holds n4's GPU."""
    nodes = [node(f"n{i}", cpu="8", gpu=1) for i in range(1, 6)]
    pods = [
        gang_pod("g-1", "n1", "g", 2),
        gang_pod("g-2", "n5", "g", 2, gpu=0),
        gang_pod("h-1", "n2", "h", 2),
        gang_pod("h-2", "n5", "h", 2, gpu=0),
        gang_pod("h-3", "n5", "h", 2, gpu=0),
        gang_pod("g-3", "n3", "g", 2),
        gang_pod("k-1", "n3", "k", 1, gpu=0, cpu="7"),
        pod("plain", "n4", prio=10, gpu=1),
    ]
    return snapshot(nodes, pods)


def test_gang_breaking_candidate_dropped_when_another_breaks_none(caplog: pytest.LogCaptureFixture) -> None:
    snap = _gang_snapshot()
    # g has 3 bound members (g-1, g-2, g-3): losing one keeps it at its minimum.
    cands: dict[str, list[str]] = {"n1": [], "n2": [], "n4": []}
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        out = preempt(PREEMPTOR, cands, snap).nodes
    assert names(out) == {"n1": (["g-1"], 0), "n2": (["h-1"], 0), "n4": (["plain"], 0)}
    assert "rule gang" not in caplog.text

    # n3 must evict g-3 (gpu) and k-1 (cpu): that takes k to zero (min 1). Others break nothing.
    big = pod("high", prio=1000, cpu="2", gpu=1)
    cands = {"n3": [], "n4": []}
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        out = preempt(big, cands, snap).nodes
    assert names(out) == {"n4": (["plain"], 0)}
    assert f"dropped node n3 (rule {RULE_GANG_AVOIDABLE})" in caplog.text
    assert "default/k" in caplog.text


def test_gang_fewest_broken_kept_when_every_candidate_breaks_one(caplog: pytest.LogCaptureFixture) -> None:
    # Gang a (min 2) has one member on each of n1, n2; gang b (min 1) is alone on n2.
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [
        gang_pod("a-1", "n1", "a", 2),
        gang_pod("a-2", "n2", "a", 2, gpu=0, cpu="7"),
        gang_pod("b-1", "n2", "b", 1),
    ]
    snap = snapshot(nodes, pods)
    big = pod("high", prio=1000, cpu="2", gpu=1)
    with caplog.at_level(logging.INFO, logger="extenders.preemption"):
        out = preempt(big, {"n2": [], "n1": []}, snap).nodes
    assert names(out) == {"n1": (["a-1"], 0)}
    assert f"dropped node n2 (rule {RULE_GANG_NOT_BEST})" in caplog.text


def test_gang_already_below_minimum_or_leaving_members_do_not_count() -> None:
    nodes = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
    pods = [
        # Gang c needs 3 but has only 2 live members: it is not "bound", evicting breaks nothing.
        gang_pod("c-1", "n1", "c", 3),
        gang_pod("c-2", "n2", "c", 3, gpu=0),
        gang_pod("c-3", "n2", "c", 3, gpu=0, deleting=True),
        # Gang d (min 1) on n2: its only member goes, so n2 breaks d and n1 breaks nothing.
        gang_pod("d-1", "n2", "d", 1),
    ]
    snap = snapshot(nodes, pods)
    out = preempt(PREEMPTOR, {"n1": [], "n2": []}, snap).nodes
    assert names(out) == {"n1": (["c-1"], 0)}


def test_gang_of_callable_is_used_instead_of_labels() -> None:
    snap = _gang_snapshot()
    # The caller says "plain" belongs to a gang of min 1 alone, and nothing else is a gang.
    calls: list[str] = []

    def gang_of(p: PodInfo) -> tuple[str, int] | None:
        calls.append(p.name)
        return ("default/solo", 1) if p.name == "plain" else None

    out = process_preemption(POLICY, pod_info(PREEMPTOR), {"n1": [], "n4": []}, snap, gang_of=gang_of).nodes
    assert names(out) == {"n1": (["g-1"], 0)}
    assert "plain" in calls
