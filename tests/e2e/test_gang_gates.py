"""The gang assembly gate through the real kube-scheduler: gated members reach it only once their
gang is whole, so none is refused for missing siblings (no ``GangWaiting`` Event saying so), where
members created without the gate are."""

from __future__ import annotations

import time

import pytest

from devstack.kube import resources, wait_for
from extenders.gang.gates import ASSEMBLY_GATE
from extenders.gang.reasons import GANG_WAITING
from tests.e2e.conftest import Cluster
from tests.e2e.test_gangs import bound, legacy

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

GATED = {"schedulingGates": [{"name": ASSEMBLY_GATE}]}


def _create(cluster: Cluster, gang: str, indexes: range, minimum: int, gated: bool) -> list[str]:
    names = [f"{gang}-{i}" for i in indexes]
    for name in names:
        cluster.pod(name, requests=resources(cpu="1"), labels=legacy(gang, minimum), **(GATED if gated else {}))
    return names


def _gates(cluster: Cluster, names: list[str]) -> dict[str, list[str]]:
    pods = {p["metadata"]["name"]: p for p in cluster.kube.pods(cluster.namespace)}
    return {n: [g["name"] for g in pods[n]["spec"].get("schedulingGates") or []] for n in names}


def _said(cluster: Cluster, names: list[str]) -> list[tuple[str, str, str]]:
    """Every Event about ``names``: (pod, reason, message), for a failure's message."""
    return [
        (e["involvedObject"]["name"], e.get("reason", ""), e.get("message", ""))
        for e in cluster.kube.events(cluster.namespace)
        if e["involvedObject"].get("name") in names
    ]


def _let_through(cluster: Cluster) -> float:
    return cluster.stack.metric("extender_gang_gates_removed_total", why="member")


def _missing_siblings(cluster: Cluster, names: list[str], behind_gate: bool = False) -> list[str]:
    """The pods among ``names`` told their gang's members did not all exist: by filter's refusal, or
    (``behind_gate``) by the watch leader keeping them gated."""
    return sorted(
        e["involvedObject"]["name"]
        for e in cluster.kube.events(cluster.namespace)
        if e.get("reason") == GANG_WAITING
        and e["involvedObject"].get("name") in names
        and "required members exist" in e.get("message", "")
        and ("scheduling gate" in e.get("message", "")) == behind_gate
    )


def test_gated_members_reach_kube_scheduler_only_once_their_gang_is_whole(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    before = _let_through(cluster)
    gated = _create(cluster, "gated", range(2), 4, gated=True)
    plain = _create(cluster, "plain", range(2), 4, gated=False)  # the same gang without the gate
    # Half of each gang exists: the plain members are filtered and refused, the gated ones wait unseen.
    wait_for(lambda: _missing_siblings(cluster, plain) or None, 30, "the plain members refused for missing siblings")
    # Each gated member is told why it waits, by the watch leader (filter never sees it).
    wait_for(lambda: _missing_siblings(cluster, gated, behind_gate=True) == sorted(gated) or None, 30, "told why")
    time.sleep(2.0)
    assert _gates(cluster, gated) == {name: [ASSEMBLY_GATE] for name in gated}, (
        "a gang short of its minimum stays gated"
    )
    assert bound(cluster, gated + plain) == []

    gated += _create(cluster, "gated", range(2, 4), 4, gated=True)
    plain += _create(cluster, "plain", range(2, 4), 4, gated=False)
    cluster.wait_bound(gated + plain, timeout=60)
    assert _gates(cluster, gated) == {n: [] for n in gated}
    refused = _missing_siblings(cluster, gated)
    assert refused == [], f"gated members filtered before their gang was whole: {_said(cluster, gated)}"
    assert _let_through(cluster) - before == 4


def test_a_gated_pod_of_no_gang_is_let_go_and_other_gates_are_left_alone(cluster: Cluster) -> None:
    cluster.nodes(1, cpu="4")
    cluster.wait_synced()
    cluster.pod("alone", requests=resources(cpu="1"), **GATED)
    other = {"schedulingGates": [{"name": "example.com/quota"}, {"name": ASSEMBLY_GATE}]}
    cluster.pod("quota", requests=resources(cpu="1"), **other)
    cluster.wait_bound(["alone"], timeout=30)
    # The other gate is someone else's: ours goes, theirs stays, and the pod waits for it.
    wait_for(lambda: _gates(cluster, ["quota"])["quota"] == ["example.com/quota"] or None, 30, "our gate removed")
    time.sleep(1.0)
    assert bound(cluster, ["quota"]) == []
