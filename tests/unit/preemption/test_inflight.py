"""kube-scheduler repeating a preemption it has already made (extenders/preemption/inflight.py), and a
victim already gone left out of an answer that has others."""

from __future__ import annotations

import dataclasses

from extenders.gang import gang_of_for
from extenders.policy import default_policy
from extenders.preemption import process_preemption
from extenders.preemption.inflight import Repeat, repeated_preemption
from extenders.sync.convert import pod_info
from tests.unit.preemption.builders import PREEMPTOR, names, node, pod, snapshot

POLICY = default_policy()
NODES = [node("n1", cpu="8", gpu=1), node("n2", cpu="8", gpu=1)]
# An earlier answer for the preemptor offered low-1 on n1 and low-2 on n2.
ANSWERED = {"n1": frozenset({"uid-low-1"}), "n2": frozenset({"uid-low-2"})}
CANDIDATES = {"n1": ["uid-low-1"], "n2": ["uid-low-2"]}


def low(name: str, on: str) -> dict[str, object]:
    return pod(name, on, prio=10, gpu=1)


def test_victims_already_gone_on_a_node_the_preemptor_was_answered_make_a_repeat() -> None:
    # kube-scheduler evicted low-1 (it picked n1); its cache still holds it, the snapshot does not.
    snap = snapshot(NODES, [low("low-2", "n2")])
    assert repeated_preemption(pod_info(PREEMPTOR), CANDIDATES, ANSWERED, snap) == Repeat("n1", frozenset())


def test_a_victim_never_answered_for_this_preemptor_is_no_repeat() -> None:
    # low-1 is gone but was offered to another preemptor (or never): our snapshot may just be behind.
    snap = snapshot(NODES, [low("low-2", "n2")])
    assert repeated_preemption(pod_info(PREEMPTOR), CANDIDATES, {"n1": frozenset({"uid-other"})}, snap) is None
    assert repeated_preemption(pod_info(PREEMPTOR), CANDIDATES, {}, snap) is None
    # kube-scheduler proposing more than the answer named (a pod arrived on n1 since) is a new preemption.
    more = {"n1": ["uid-low-1", "uid-low-3"]}
    assert repeated_preemption(pod_info(PREEMPTOR), more, ANSWERED, snapshot(NODES, [low("low-3", "n1")])) is None


def test_victims_still_there_make_a_repeat_only_on_the_nominated_node() -> None:
    snap = snapshot(NODES, [low("low-1", "n1"), low("low-2", "n2")])
    nominated = dataclasses.replace(pod_info(PREEMPTOR), nominated_node_name="n2")
    assert repeated_preemption(nominated, CANDIDATES, ANSWERED, snap) == Repeat("n2", frozenset({"uid-low-2"}))
    # No nomination yet, and two nodes match: kube-scheduler may have picked either, or none.
    assert repeated_preemption(pod_info(PREEMPTOR), CANDIDATES, ANSWERED, snap) is None
    # No nomination, one node matches: it is the one.
    only = {"n2": ["uid-low-2"]}
    assert repeated_preemption(pod_info(PREEMPTOR), only, ANSWERED, snap) == Repeat("n2", frozenset({"uid-low-2"}))
    # Nominated to a node kube-scheduler does not propose: the others are not where it evicted.
    elsewhere = dataclasses.replace(pod_info(PREEMPTOR), nominated_node_name="n3")
    assert repeated_preemption(elsewhere, only, ANSWERED, snap) is None


def test_a_victim_gone_since_an_answer_is_left_out_when_others_remain() -> None:
    # The preemptor needs two GPUs on n1: low-1 (gone since our answer named it) and low-3 (there).
    # Answering low-1 as well would make kube-scheduler delete a pod already gone, possibly last,
    # which emits no event; low-3 alone is the answer.
    nodes = [node("n1", cpu="8", gpu=2)]
    snap = snapshot(nodes, [low("low-3", "n1")])
    preemptor = pod_info(pod("high", prio=1000, cpu="1", gpu=2))
    result = process_preemption(
        POLICY, preemptor, {"n1": ["uid-low-1", "uid-low-3"]}, snap, gang_of=gang_of_for(snap), departed={"uid-low-1"}
    )
    assert names(result.nodes) == {"n1": (["low-3"], 0)}
