"""Pod request arithmetic with pod-level resources (``spec.resources``) and in-place resize (the
status's allocated and actual resources), as kube-scheduler computes it."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    pod_requests,
)
from tests.unit.resource_specs import GI, MI, c, pod_nonzero_requests, sidecar


# ---------------------------------------------------------------- pod-level resources (spec.resources)
def pod_level(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return resources


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [c({"cpu": "1", "memory": "1Gi"})], "resources": pod_level({"cpu": "2"})},
            {"cpu": 2000, "memory": GI},
            id="pod-level-cpu-replaces-the-containers-cpu-only",
        ),
        pytest.param(
            {
                "containers": [c({"cpu": "1"}), c({"cpu": "1"})],
                "initContainers": [c({"cpu": "3"})],
                "resources": pod_level({"cpu": "1500m"}),
            },
            {"cpu": 1500},
            id="it-replaces-the-init-peak-too",
        ),
        pytest.param(
            {
                "containers": [c({"nvidia.com/gpu": "1", "ephemeral-storage": "1Gi", "cpu": "1"})],
                "resources": pod_level({"memory": "2Gi"}),
            },
            {"nvidia.com/gpu": 1, "ephemeral-storage": GI, "cpu": 1000, "memory": 2 * GI},
            id="other-resources-stay-the-containers",
        ),
        pytest.param(
            {"containers": [c(), c()], "resources": pod_level(limits={"cpu": "4", "memory": "2Gi"})},
            {"cpu": 4000, "memory": 2 * GI},
            id="limits-alone-default-the-requests",
        ),
        pytest.param(
            {
                "containers": [c({"cpu": "500m"}), c({"cpu": "1"})],
                "resources": pod_level(limits={"cpu": "4", "memory": "1Gi"}),
            },
            {"cpu": 1500, "memory": GI},
            id="limits-default-to-the-containers-requests-first",
        ),
        pytest.param(
            {"containers": [c({"cpu": "1"})], "resources": pod_level({"hugepages-2Mi": "128Mi"})},
            {"cpu": 1000, "hugepages-2Mi": 128 * MI},
            id="hugepages-are-pod-level",
        ),
        pytest.param(
            {"containers": [c({"cpu": "1"})], "resources": pod_level({"ephemeral-storage": "5Gi"})},
            {"cpu": 1000},
            id="unsupported-names-alone-do-not-set-pod-level",
        ),
        pytest.param(
            {
                "containers": [c({"cpu": "1"})],
                "resources": pod_level({"cpu": "2"}),
                "overhead": {"cpu": "250m", "memory": "64Mi"},
            },
            {"cpu": 2250, "memory": 64 * MI},
            id="overhead-is-added-after",
        ),
        pytest.param(
            {"containers": [c({"cpu": "1"})], "resources": {}},
            {"cpu": 1000},
            id="empty-resources",
        ),
    ],
)
def test_pod_level_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests(spec) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [c(), c()], "resources": pod_level({"cpu": "2", "memory": "1Gi"})},
            (2000, GI),
            id="pod-level-values-not-per-container-defaults",
        ),
        pytest.param(
            {"containers": [c(), c()], "resources": pod_level({"memory": "1Gi"})},
            (2 * DEFAULT_MILLI_CPU_REQUEST, GI),
            id="a-resource-named-nowhere-gets-the-defaults",
        ),
        pytest.param(
            {"containers": [c({"memory": "64Mi"}), c()], "resources": pod_level({"cpu": "1"})},
            (1000, 64 * MI),
            id="a-resource-one-container-names-gets-no-default",
        ),
        pytest.param(
            {"containers": [c()], "resources": pod_level({"cpu": "1"}), "overhead": {"memory": "10Mi"}},
            (1000, 10 * MI),
            id="the-overhead-naming-it-counts-too",
        ),
        pytest.param(
            {"containers": [c({"memory": "64Mi"}), c()]},
            (2 * DEFAULT_MILLI_CPU_REQUEST, 64 * MI + DEFAULT_MEMORY_REQUEST),
            id="without-pod-level-every-container-gets-defaults",
        ),
    ],
)
def test_pod_level_nonzero_requests(spec: dict[str, Any], expected: tuple[int, int]) -> None:
    assert pod_nonzero_requests(spec) == expected


# ---------------------------------------------------------------- in-place resize (status)
def status_of(
    name: str = "c",
    allocated: dict[str, Any] | None = None,
    actual: dict[str, Any] | None = None,
    *,
    condition: str | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if allocated is not None:
        entry["allocatedResources"] = allocated
    if actual is not None:
        entry["resources"] = {"requests": actual}
    status: dict[str, Any] = {"containerStatuses": [entry]}
    if condition:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": condition}]
    return status


ONE_CPU = {"containers": [c({"cpu": "1", "memory": "1Gi"})]}
FOUR_CPU = {"containers": [c({"cpu": "4", "memory": "1Gi"})]}


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param(ONE_CPU, {}, {"cpu": 1000, "memory": GI}, id="no-status-the-spec"),
        pytest.param(
            ONE_CPU,
            status_of(allocated={"cpu": "2", "memory": "1Gi"}),
            {"cpu": 2000, "memory": GI},
            id="allocated-above-spec",
        ),
        pytest.param(
            ONE_CPU,
            status_of(allocated={"cpu": "500m", "memory": "1Gi"}, actual={"cpu": "1500m", "memory": "1Gi"}),
            {"cpu": 1500, "memory": GI},
            id="actuated-above-both",
        ),
        pytest.param(
            FOUR_CPU,
            status_of(allocated={"cpu": "1", "memory": "1Gi"}, actual={"cpu": "1", "memory": "1Gi"}),
            {"cpu": 4000, "memory": GI},
            id="a-pending-resize-up-counts-the-spec",
        ),
        pytest.param(
            FOUR_CPU,
            status_of(
                allocated={"cpu": "1", "memory": "1Gi"}, actual={"cpu": "1", "memory": "1Gi"}, condition="Deferred"
            ),
            {"cpu": 4000, "memory": GI},
            id="deferred-still-counts-the-spec",
        ),
        pytest.param(
            FOUR_CPU,
            status_of(
                allocated={"cpu": "1", "memory": "1Gi"}, actual={"cpu": "1", "memory": "1Gi"}, condition="Infeasible"
            ),
            {"cpu": 1000, "memory": GI},
            id="infeasible-drops-the-spec",
        ),
        pytest.param(
            FOUR_CPU,
            status_of(
                allocated={"cpu": "2", "memory": "1Gi"}, actual={"cpu": "1", "memory": "1Gi"}, condition="Infeasible"
            ),
            {"cpu": 2000, "memory": GI},
            id="infeasible-takes-the-larger-of-allocated-and-actuated",
        ),
        pytest.param(
            ONE_CPU,
            status_of("other", allocated={"cpu": "8"}),
            {"cpu": 1000, "memory": GI},
            id="a-status-of-another-name-is-ignored",
        ),
        pytest.param(
            {"containers": [c({"cpu": "1"})], "initContainers": [{**sidecar({"cpu": "500m"}), "name": "s"}]},
            {"initContainerStatuses": [{"name": "s", "allocatedResources": {"cpu": "2"}}]},
            {"cpu": 3000},
            id="init-container-statuses-are-read-too",
        ),
        pytest.param(
            ONE_CPU,
            {
                "allocatedResources": {"cpu": "3", "memory": "1Gi"},
                "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
            },
            {"cpu": 3000, "memory": GI},
            id="pod-wide-status-totals",
        ),
        pytest.param(
            {**ONE_CPU, "resources": pod_level({"cpu": "2"}), "overhead": {"cpu": "500m"}},
            {"resources": {"requests": {"cpu": "3"}}},
            {"cpu": 3000, "memory": GI},
            id="pod-level-with-status-less-its-overhead",
        ),
        pytest.param(
            {**ONE_CPU, "resources": pod_level({"cpu": "2"})},
            {
                **status_of(allocated={"cpu": "1", "memory": "1Gi"}, condition="Infeasible"),
                "resources": {"requests": {"cpu": "1"}},
            },
            {"cpu": 1000, "memory": GI},
            id="pod-level-infeasible-drops-the-spec",
        ),
    ],
)
def test_resized_pods_count_the_larger_of_spec_and_status(
    spec: dict[str, Any], status: dict[str, Any], expected: dict[str, int]
) -> None:
    assert pod_requests(spec, status) == expected


def test_resized_pods_nonzero_requests_follow_the_status() -> None:
    spec = {"containers": [c({"cpu": "1"})]}
    status = status_of(allocated={"cpu": "3"})
    assert pod_nonzero_requests(spec, status) == (3000, DEFAULT_MEMORY_REQUEST)


@pytest.mark.parametrize(
    ("container", "reported", "expected"),
    [
        pytest.param(c({"cpu": "1", "memory": "1Gi"}), {"cpu": "1", "memory": "1Gi"}, 1000, id="verbatim"),
        pytest.param(c({"cpu": "1", "memory": "1Gi"}), {"cpu": "1000m", "memory": "1Gi"}, 1000, id="other-notation"),
        pytest.param(c(limits={"cpu": "1", "memory": "1Gi"}), {"cpu": "1", "memory": "1Gi"}, 1000, id="from-limits"),
    ],
)
def test_statuses_that_repeat_the_spec_count_the_spec(
    container: dict[str, Any], reported: dict[str, Any], expected: int
) -> None:
    """The kubelet reports allocated and actuated amounts equal to the spec for most running pods."""
    status = status_of(allocated=reported, actual=reported)
    assert pod_requests({"containers": [container]}, status) == {"cpu": expected, "memory": GI}
    assert pod_nonzero_requests({"containers": [container]}, status) == (expected, GI)


def test_a_status_equal_to_the_requests_but_not_to_a_limit_standing_in_is_parsed() -> None:
    """The spec's requests name cpu only and a limit stands in for memory: a status naming cpu alone
    is not the spec, as an infeasible resize (which counts only the status) shows."""
    spec = {"containers": [c({"cpu": "1"}, {"memory": "1Gi"})]}
    status = status_of(allocated={"cpu": "1"}, actual={"cpu": "1"}, condition="Infeasible")
    assert pod_requests(spec, status) == {"cpu": 1000}
