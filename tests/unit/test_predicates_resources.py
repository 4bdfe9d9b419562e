"""PodFitsResources, PodFitsHostPorts and NoDiskConflict."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.gen_cluster import make_node, make_pod, run_predicate

GPU = "example.com/gpu"


def _fits(requests: dict[str, str], allocatable: dict[str, str], used: list[dict[str, str]] | None = None) -> Verdict:
    pods = [make_pod(f"e{i}", requests=r) for i, r in enumerate(used or [])]
    node = make_node(allocatable=allocatable, pods=pods)
    return run_predicate("PodFitsResources", make_pod(requests=requests), node)


BASE = {"cpu": "2", "memory": "4Gi", "pods": "10", "ephemeral-storage": "10Gi"}


@pytest.mark.parametrize(
    ("requests", "allocatable", "used", "expected"),
    [
        ({}, BASE, [], Verdict(True)),
        ({"cpu": "1"}, BASE, [{"cpu": "1"}], Verdict(True)),
        ({"cpu": "1001m"}, BASE, [{"cpu": "1"}], Verdict(False, "Insufficient cpu")),
        ({"memory": "3Gi"}, BASE, [{"memory": "2Gi"}], Verdict(False, "Insufficient memory")),
        ({"ephemeral-storage": "11Gi"}, BASE, [], Verdict(False, "Insufficient ephemeral-storage", True)),
        # Requesting more than the node's whole allocatable cannot be fixed by preemption.
        ({"cpu": "3"}, BASE, [], Verdict(False, "Insufficient cpu", True)),
        # A resource the node does not have at all.
        ({GPU: "1"}, BASE, [], Verdict(False, f"Insufficient {GPU}", True)),
        ({GPU: "1"}, {**BASE, GPU: "2"}, [{GPU: "1"}], Verdict(True)),
        ({GPU: "2"}, {**BASE, GPU: "2"}, [{GPU: "1"}], Verdict(False, f"Insufficient {GPU}")),
        (
            {"hugepages-2Mi": "4Mi"},
            {**BASE, "hugepages-2Mi": "2Mi"},
            [],
            Verdict(False, "Insufficient hugepages-2Mi", True),
        ),
        ({"hugepages-2Mi": "4Mi"}, {**BASE, "hugepages-2Mi": "8Mi"}, [], Verdict(True)),
        # Pod count, checked even for a pod that requests nothing.
        ({}, {**BASE, "pods": "1"}, [{}], Verdict(False, "Too many pods")),
        ({}, {"cpu": "1"}, [], Verdict(False, "Too many pods")),
        # Every shortfall is reported, in kube-scheduler's order.
        (
            {"cpu": "2", "memory": "1Gi", GPU: "1"},
            {**BASE, "pods": "1"},
            [{"cpu": "1", "memory": "3500Mi"}],
            Verdict(False, f"Too many pods, Insufficient cpu, Insufficient memory, Insufficient {GPU}", True),
        ),
    ],
)
def test_pod_fits_resources(
    requests: dict[str, str], allocatable: dict[str, str], used: list[dict[str, str]], expected: Verdict
) -> None:
    assert _fits(requests, allocatable, used) == expected


def _port(host_port: int, protocol: str = "TCP", host_ip: str = "") -> dict[str, Any]:
    port: dict[str, Any] = {"containerPort": host_port, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        port["hostIP"] = host_ip
    return port


def _with_ports(name: str, ports: list[dict[str, Any]]) -> Any:
    return make_pod(name, spec={"containers": [{"name": "c", "ports": ports}]})


PORT_FAIL = Verdict(False, "node(s) didn't have free ports for the requested pod ports")


@pytest.mark.parametrize(
    ("wanted", "used", "fit"),
    [
        ([], [_port(80)], True),
        ([_port(80)], [], True),
        ([_port(80)], [_port(8080)], True),
        ([_port(80)], [_port(80)], False),
        ([_port(80, "UDP")], [_port(80, "TCP")], True),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "10.0.0.2")], True),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "10.0.0.1")], False),
        # 0.0.0.0 conflicts with every address, in both directions.
        ([_port(80, "TCP", "0.0.0.0")], [_port(80, "TCP", "10.0.0.1")], False),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "0.0.0.0")], False),
        ([_port(80, "UDP", "0.0.0.0")], [_port(80, "TCP", "10.0.0.1")], True),
        ([_port(443), _port(80)], [_port(80)], False),
    ],
)
def test_pod_fits_host_ports(wanted: list[dict[str, Any]], used: list[dict[str, Any]], fit: bool) -> None:
    node = make_node(pods=[_with_ports("existing", used)])
    verdict = run_predicate("PodFitsHostPorts", _with_ports("p", wanted), node)
    assert verdict == (Verdict(True) if fit else PORT_FAIL)
    assert not verdict.unresolvable


def _with_volume(name: str, volume: dict[str, Any]) -> Any:
    return make_pod(name, spec={"volumes": [{"name": "v", **volume}]})


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def ebs(vol: str, ro: bool = False) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": vol, "readOnly": ro}}


def rbd(monitors: list[str], image: str, ro: bool = False, pool: str = "rbd") -> dict[str, Any]:
    return {"rbd": {"monitors": monitors, "image": image, "pool": pool, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"iscsi": {"targetPortal": "1.2.3.4:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


@pytest.mark.parametrize(
    ("wanted", "existing", "fit"),
    [
        (gce("a"), gce("b"), True),
        (gce("a"), gce("a"), False),
        (gce("a", True), gce("a", True), True),
        (gce("a", True), gce("a"), False),
        (ebs("a"), ebs("b"), True),
        (ebs("a", True), ebs("a", True), False),  # EBS conflicts even read-only
        (rbd(["m1"], "i"), rbd(["m2"], "i"), True),
        (rbd(["m1", "m2"], "i"), rbd(["m2"], "i"), False),
        (rbd(["m1"], "i", True), rbd(["m1"], "i", True), True),
        (rbd(["m1"], "i"), rbd(["m1"], "j"), True),
        (rbd(["m1"], "i"), rbd(["m1"], "i", pool="other"), True),
        (iscsi("q1"), iscsi("q2"), True),
        (iscsi("q1"), iscsi("q1"), False),
        (iscsi("q1", True), iscsi("q1", True), True),
        (gce("a"), ebs("a"), True),
    ],
)
def test_no_disk_conflict(wanted: dict[str, Any], existing: dict[str, Any], fit: bool) -> None:
    node = make_node(pods=[_with_volume("existing", existing)])
    verdict = run_predicate("NoDiskConflict", _with_volume("p", wanted), node)
    assert verdict == (Verdict(True) if fit else Verdict(False, "node(s) had no available disk"))
