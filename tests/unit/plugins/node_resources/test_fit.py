"""NodeResourcesFit (PodFitsResources): requests against what the node has left."""

from __future__ import annotations

import pytest

from extenders.plugins.framework import Verdict
from tests.plugin_cases import make_node, make_pod, run_predicate

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
