"""Which gated pods the watch leader lets through the gang assembly gate, how it removes the gate, and
the Event a member kept behind it gets."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from extenders.gang.gates import (
    ASSEMBLY_GATE,
    MEMBER,
    NO_GANG,
    RESEND_SECONDS,
    SHORT,
    UNKNOWN_MINIMUM,
    UNKNOWN_MINIMUM_SECONDS,
    AssemblyGates,
    sort_gated,
)
from extenders.gang.membership import GangIndex, GangIndexCache, timestamp_ms
from extenders.gang.reasons import GANG_WAITING
from extenders.kube.events import ObjectRef
from extenders.model import NodeInfo, PodInfo
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info
from tests.gang_support import gpu_node, member

CREATED = "2024-01-01T00:00:00Z"
NOW = (timestamp_ms(CREATED) or 0) + 1000  # a second after every pod here was created


def _gated(pod: dict[str, Any], *gates: str) -> PodInfo:
    pod["spec"]["schedulingGates"] = [{"name": g} for g in gates or (ASSEMBLY_GATE,)]
    return pod_info(pod)


def _names(due: dict[tuple[str, str], list[PodInfo]]) -> dict[tuple[str, str], list[str]]:
    return {key: sorted(p.name for p in pods) for key, pods in due.items()}


def _snapshot(pending: list[PodInfo], placed: tuple[PodInfo, ...] = ()) -> Snapshot:
    node = NodeInfo.build("n1", node_facts(gpu_node("n1")), list(placed))
    return Snapshot(nodes={"n1": node}, pending={p.uid: p for p in pending})


def test_a_gangs_gated_members_go_once_its_live_members_reach_the_minimum() -> None:
    a, b = _gated(member("g-0", "g", 3)), _gated(member("g-1", "g", 3))
    snap = _snapshot([a, b])
    assert _names(sort_gated(snap, GangIndex(snap), NOW)) == {(SHORT, "default/g"): ["g-0", "g-1"]}, "2 of 3"
    third = pod_info(member("g-2", "g", 3))  # not gated, already bound: a member all the same
    third.node_name = "n1"
    snap = _snapshot([a, b], (third,))
    assert _names(sort_gated(snap, GangIndex(snap), NOW)) == {(MEMBER, "default/g"): ["g-0", "g-1"]}
    gone = _gated(member("g-1", "g", 3))
    gone.deletion_timestamp = CREATED
    snap = _snapshot([a, gone], (third,))
    # A terminating member is no member, nor let through.
    assert _names(sort_gated(snap, GangIndex(snap), NOW)) == {(SHORT, "default/g"): ["g-0"]}


def test_pods_of_no_gang_go_at_once_and_only_our_gate_counts() -> None:
    plain = _gated(member("plain", None))
    native = _gated(member("native", "n", 2))
    native.native_group = "training/workers"  # kube-scheduler's own gang plug-in holds it
    theirs = _gated(member("theirs", None), "example.com/quota")
    snap = _snapshot([plain, native, theirs])
    assert _names(sort_gated(snap, GangIndex(snap), NOW)) == {(NO_GANG, ""): ["native", "plain"]}


def test_a_member_whose_minimum_is_unknown_waits_for_its_podgroup_then_goes() -> None:
    pod = _gated(member("pg-0", "pg"))  # names a PodGroup that does not exist (yet)
    snap = _snapshot([pod])
    assert sort_gated(snap, GangIndex(snap), NOW) == {}
    later = NOW + int(UNKNOWN_MINIMUM_SECONDS * 1000)
    assert _names(sort_gated(snap, GangIndex(snap), later)) == {(UNKNOWN_MINIMUM, "default/pg"): ["pg-0"]}, (
        "filter then says why"
    )


class _Kube:
    """Records gate removals; answers False (the pod's gates changed) for the uids in ``refuse``."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.refuse = refuse
        self.events: list[tuple[str, str, str]] = []  # (pod, reason, message)

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append((ref.name, reason, message))

    async def remove_scheduling_gate(self, namespace: str, name: str, uid: str, gate: str, position: int) -> bool:
        self.calls.append((name, gate, position))
        return uid not in self.refuse


def test_each_gate_is_removed_once_at_its_position_and_a_refused_removal_is_tried_again() -> None:
    pod = _gated(member("g-0", "g", 1), "example.com/quota", ASSEMBLY_GATE)
    other = _gated(member("x", None))
    kube = _Kube(refuse=frozenset({other.uid}))
    snap = _snapshot([pod, other])

    async def snapshot() -> Snapshot:
        return snap

    counter = Counter("gates_removed", "test", ["why"], registry=CollectorRegistry())
    gates = AssemblyGates(kube, snapshot, GangIndexCache(), counter)  # type: ignore[arg-type]

    async def scenario() -> None:
        assert await gates.release(snap) == 1
        assert sorted(kube.calls) == [("g-0", ASSEMBLY_GATE, 1), ("x", ASSEMBLY_GATE, 0)]
        kube.calls.clear()
        assert await gates.release(snap) == 0, "sent already: not again while the watch catches up"
        assert kube.calls == []
        for uid in gates._sent:
            gates._sent[uid] -= RESEND_SECONDS - 1.0  # a refused removal waits a second, a sent one RESEND_SECONDS
        await gates.release(snap)
        assert kube.calls == [("x", ASSEMBLY_GATE, 0)]
        assert counter.labels(MEMBER)._value.get() == 1 and counter.labels(NO_GANG)._value.get() == 0

    asyncio.run(scenario())


def test_a_member_kept_behind_the_gate_is_told_why_once() -> None:
    a, b = _gated(member("g-0", "g", 3)), _gated(member("g-1", "g", 3))
    kube = _Kube()
    snap = _snapshot([a, b])

    async def snapshot() -> Snapshot:
        return snap

    gates = AssemblyGates(kube, snapshot, GangIndexCache(), None, kube)  # type: ignore[arg-type]

    async def scenario() -> None:
        assert await gates.release(snap) == 0
        await gates.release(snap)
        assert sorted(name for name, _, _ in kube.events) == ["g-0", "g-1"], "once each"
        assert {reason for _, reason, _ in kube.events} == {GANG_WAITING}
        assert "only 2 of the 3 required members exist" in kube.events[0][2]
        assert kube.calls == []

    asyncio.run(scenario())
