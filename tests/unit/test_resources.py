"""Pod request arithmetic as kube-scheduler computes it (resourcehelper.PodRequests)."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.quantity import QuantityError
from extenders.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    container_requests,
    is_best_effort,
    pod_requests,
    pod_resources,
)

GI = 2**30
MI = 2**20


def pod_nonzero_requests(spec: dict[str, Any], status: dict[str, Any] | None = None) -> tuple[int, int]:
    """(millicpu, memory) as a node's totals count the pod: ``pod_resources``' non-zero pair."""
    resources = pod_resources(spec, status)
    return resources.nonzero_cpu, resources.nonzero_memory


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def sidecar(requests: dict[str, Any]) -> dict[str, Any]:
    return c(requests, restartPolicy="Always")


def test_containers_add_up() -> None:
    spec = {"containers": [c({"cpu": "100m", "memory": "1Gi"}), c({"cpu": "1.5", "memory": "512Mi"})]}
    assert pod_requests(spec) == {"cpu": 1600, "memory": GI + 512 * MI}


def test_missing_requests_count_as_nothing_for_fit() -> None:
    assert pod_requests({"containers": [c(), {"name": "bare"}]}) == {}
    assert pod_requests({}) == {}


def test_limits_only_container_requests_its_limits() -> None:
    assert container_requests(c(limits={"cpu": "2", "memory": "1Gi"})) == {"cpu": 2000, "memory": GI}
    # a request present wins over the limit; other limited resources default to their limit
    assert container_requests(c({"cpu": "500m"}, {"cpu": "2", "memory": "1Gi"})) == {"cpu": 500, "memory": GI}


def test_init_containers_take_the_max_not_the_sum() -> None:
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi"})],
        "initContainers": [c({"cpu": "3", "memory": "256Mi"}), c({"cpu": "2", "memory": "2Gi"})],
    }
    assert pod_requests(spec) == {"cpu": 3000, "memory": 2 * GI}


def test_init_container_below_regular_containers_changes_nothing() -> None:
    spec = {"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "500m"})]}
    assert pod_requests(spec) == {"cpu": 1000}


def test_sidecars_add_to_regular_containers() -> None:
    spec = {"containers": [c({"cpu": "1"})], "initContainers": [sidecar({"cpu": "200m", "memory": "64Mi"})]}
    assert pod_requests(spec) == {"cpu": 1200, "memory": 64 * MI}


def test_sidecars_started_earlier_run_beside_later_init_containers() -> None:
    # sidecar 500m, then an init container of 2 -> init peak 2.5 > regular 1 + 0.5
    spec = {
        "containers": [c({"cpu": "1"})],
        "initContainers": [sidecar({"cpu": "500m"}), c({"cpu": "2"})],
    }
    assert pod_requests(spec) == {"cpu": 2500}


def test_init_container_before_a_sidecar_does_not_see_it() -> None:
    # init 2 runs alone, then sidecar 500m starts; peak = max(2, 1 + 0.5) = 2
    spec = {
        "containers": [c({"cpu": "1"})],
        "initContainers": [c({"cpu": "2"}), sidecar({"cpu": "500m"})],
    }
    assert pod_requests(spec) == {"cpu": 2000}


def test_several_sidecars_accumulate() -> None:
    spec = {
        "containers": [c({"cpu": "100m"})],
        "initContainers": [sidecar({"cpu": "1"}), sidecar({"cpu": "1"}), c({"cpu": "1500m"})],
    }
    # regular phase: 0.1 + 2 = 2.1; init peak: 2 + 1.5 = 3.5
    assert pod_requests(spec) == {"cpu": 3500}


def test_overhead_is_added_after_the_max() -> None:
    spec = {
        "containers": [c({"cpu": "1", "memory": "1Gi"})],
        "initContainers": [c({"cpu": "2"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == {"cpu": 2250, "memory": GI + 120 * MI}


def test_extended_and_other_resources_in_base_units() -> None:
    spec = {
        "containers": [
            c({"nvidia.com/gpu": "2", "ephemeral-storage": "1G", "hugepages-2Mi": "64Mi"}),
            c(limits={"nvidia.com/gpu": "1", "example.com/foo": "3"}),
        ]
    }
    assert pod_requests(spec) == {
        "nvidia.com/gpu": 3,
        "ephemeral-storage": 10**9,
        "hugepages-2Mi": 64 * MI,
        "example.com/foo": 3,
    }


def test_milli_cpu_rounds_up_per_container() -> None:
    spec = {"containers": [c({"cpu": "0.5m"}), c({"cpu": "0.5m"})]}
    assert pod_requests(spec) == {"cpu": 2}


def test_explicit_zero_requests_are_dropped_from_the_totals() -> None:
    assert pod_requests({"containers": [c({"cpu": "0", "memory": "0"})]}) == {}


def test_bad_quantity_raises() -> None:
    with pytest.raises(QuantityError):
        pod_requests({"containers": [c({"cpu": "lots"})]})


def test_nonzero_defaults_only_where_missing() -> None:
    assert pod_nonzero_requests({"containers": [c()]}) == (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    assert pod_nonzero_requests({"containers": [c({"cpu": "300m"})]}) == (300, DEFAULT_MEMORY_REQUEST)
    assert pod_nonzero_requests({"containers": [c({"memory": "1Gi"})]}) == (DEFAULT_MILLI_CPU_REQUEST, GI)
    # an explicit zero is a request of zero, not a missing one
    assert pod_nonzero_requests({"containers": [c({"cpu": "0", "memory": "0"})]}) == (0, 0)


def test_nonzero_defaults_apply_per_container() -> None:
    spec = {"containers": [c(), c({"cpu": "1", "memory": "1Gi"})]}
    assert pod_nonzero_requests(spec) == (1000 + DEFAULT_MILLI_CPU_REQUEST, GI + DEFAULT_MEMORY_REQUEST)


def test_nonzero_uses_the_init_phase_and_overhead() -> None:
    spec = {
        "containers": [c({"cpu": "100m", "memory": "100Mi"})],
        "initContainers": [c({"cpu": "2"})],  # memory missing: defaulted to 200Mi for the init step
        "overhead": {"cpu": "10m", "memory": "1Mi", "nvidia.com/gpu": "1"},
    }
    assert pod_nonzero_requests(spec) == (2010, DEFAULT_MEMORY_REQUEST + MI)


def test_nonzero_counts_limits_only_containers_as_requested() -> None:
    assert pod_nonzero_requests({"containers": [c(limits={"cpu": "2"})]}) == (2000, DEFAULT_MEMORY_REQUEST)


def test_no_containers_means_no_nonzero_request() -> None:
    assert pod_nonzero_requests({}) == (0, 0)


@pytest.mark.parametrize(
    ("containers", "init", "expected"),
    [
        ([c()], [], True),
        ([c({"nvidia.com/gpu": "1"})], [], True),  # only cpu and memory decide the QoS class
        ([c({"cpu": "1"})], [], False),
        ([c(limits={"memory": "1Gi"})], [], False),
        ([c()], [c({"memory": "1Gi"})], False),
        ([c({"cpu": "0"}, {"memory": "0"})], [], True),  # zero counts as unset, as in ComputePodQOS
        ([c({"cpu": "0", "memory": "1m"})], [], False),
    ],
)
def test_best_effort(containers: list[dict[str, Any]], init: list[dict[str, Any]], expected: bool) -> None:
    assert is_best_effort({"containers": containers, "initContainers": init}) is expected


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
