"""The scheduling view: pod states and the NodeInfo aggregates."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeFacts, NodeInfo, PodInfo

GI = 2**30


def test_terminal_phases() -> None:
    for phase, terminal in (("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False)):
        assert PodInfo(namespace="d", name="p", uid="u", phase=phase).terminal is terminal


def pod(uid: str, cpu: int, ports: list[tuple[str, str, int]] | None = None, **kw: Any) -> PodInfo:
    return PodInfo(
        namespace="d",
        name=uid,
        uid=uid,
        requests={"cpu": cpu, "memory": 10},
        nonzero_cpu=cpu,
        nonzero_memory=10,
        host_ports=ports or [],
        **kw,
    )


def test_node_info_aggregates_add_replace_remove() -> None:
    facts = NodeFacts(name="n", allocatable={"cpu": 4000})
    anti: dict[str, Any] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}
    info = NodeInfo.build("n", facts, [pod("a", 100, [("TCP", "0.0.0.0", 80)]), pod("b", 200, affinity=anti)], 5)
    assert info.generation == 5 and info.allocatable == {"cpu": 4000}
    assert info.requested == {"cpu": 300, "memory": 20}
    assert info.requested_with_pods() == {"cpu": 300, "memory": 20, "pods": 2}
    assert (info.nonzero_cpu, info.used_ports) == (300, {("TCP", "0.0.0.0", 80)})
    assert [p.uid for p in info.pods_with_affinity] == ["b"]
    assert [p.uid for p in info.pods_with_required_anti_affinity] == ["b"]
    info.add_pod(pod("a", 50))  # replaces, not adds
    assert info.requested == {"cpu": 250, "memory": 20} and info.used_ports == set()
    assert info.remove_pod("b") is not None
    assert info.remove_pod("missing") is None
    assert info.requested == {"cpu": 50, "memory": 10} and info.pods_with_affinity == []
    info.remove_pod("a")
    assert info.requested == {} and info.nonzero_cpu == 0 and info.requested_with_pods() == {"pods": 0}


def test_node_info_without_node_object() -> None:
    info = NodeInfo.build("ghost", None, [pod("a", 100)])
    assert info.allocatable == {} and info.labels == {} and info.requested["cpu"] == 100
