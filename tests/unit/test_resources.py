"""Pod request arithmetic as kube-scheduler computes it (resourcehelper.PodRequests): containers, init
containers, sidecars, overhead, non-zero defaults, the QoS class."""

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
)
from tests.unit.resource_specs import GI, MI, c, pod_nonzero_requests, sidecar


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
