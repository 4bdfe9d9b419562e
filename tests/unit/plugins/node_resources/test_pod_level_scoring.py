"""Pod-level requests (``spec.resources.requests``, Beta and on by default from 1.34) in the resource scorers.

kube-scheduler counts a pod two ways there, both computed here by hand:

* placed on a node, in NodeInfo.NonZeroRequested (PodInfo.CalculateResource): PodRequests with the
  pod-level requests replacing the containers' cpu/memory; the scoring defaults (100m, 200Mi) fill in,
  per container, only a resource that nothing (containers, pod level, overhead) names;
* as the pod being scheduled, in NodeResourcesFit's score (resourceAllocationScorer.
  calculatePodResourceRequest): NewFit never sets its scorer's enablePodLevelResources, so PodRequests
  skips the pod level and counts every container's spec with each missing cpu/memory defaulted.

BalancedAllocation's scorer does get the flag: it counts the pod-level requests (no defaults).
Scores here are 0..10 (kube-scheduler's 0..100 divided by 10).
"""

from __future__ import annotations

from typing import Any

import pytest

from extenders import engine
from extenders.model import PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.node_resources.terms import resource_terms
from extenders.policy import default_policy
from extenders.resources import pod_resources
from extenders.snapshot import Snapshot
from extenders.sync.convert import pod_info
from tests.plugin_cases import make_node
from tests.unit.plugins.scoring import run

MI = 2**20
GI = 2**30
CPU_MEMORY = ScoringContext(resource_weights={"cpu": 1, "memory": 1})


def container(name: str, requests: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests} if requests else {}, **extra}


def sidecar(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return container(name, requests, restartPolicy="Always")


def placed(name: str, spec: dict[str, Any], node: str = "n1", status: dict[str, Any] | None = None) -> PodInfo:
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    return pod_info({"metadata": meta, "spec": {**spec, "nodeName": node}, "status": status or {}})


def incoming(spec: dict[str, Any]) -> PodInfo:
    return pod_info({"metadata": {"name": "in", "namespace": "default", "uid": "uid-in"}, "spec": spec})


# name, spec, requests (fit), what a node's non-zero totals count, what NodeResourcesFit scores for it
CASES: list[tuple[str, dict[str, Any], dict[str, int], tuple[int, int], tuple[int, int]]] = [
    # The fidelity run's p002: node totals count the pod level, the scored pod its container.
    (
        "pod-level-above-the-container",
        {
            "containers": [container("main", {"cpu": "100m", "memory": "512Mi"})],
            "resources": {"requests": {"cpu": "1100m", "memory": "768Mi"}},
        },
        {"cpu": 1100, "memory": 768 * MI},
        (1100, 768 * MI),
        (100, 512 * MI),
    ),
    # Pod level over containers that request nothing: the node counts the pod level; the scored
    # pod, each container's defaults: 2 x (100m, 200Mi).
    (
        "pod-level-overrides-missing-container-requests",
        {"containers": [container("a"), container("b")], "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
        {"cpu": 2000, "memory": GI},
        (2000, GI),
        (200, 400 * MI),
    ),
    # cpu only at the pod level, one container names memory: memory is named, so the node counts
    # the containers' 256Mi and no default; the scored pod: cpu 100m + 100m, memory 200Mi + 256Mi.
    (
        "cpu-only-memory-named-by-a-container",
        {
            "containers": [container("a"), container("b", {"memory": "256Mi"})],
            "resources": {"requests": {"cpu": "1500m"}},
        },
        {"cpu": 1500, "memory": 256 * MI},
        (1500, 256 * MI),
        (200, 456 * MI),
    ),
    # memory only at the pod level and cpu named nowhere: the node fills in the cpu default per
    # container (2 x 100m); the scored pod counts both defaults per container.
    (
        "memory-only-cpu-named-nowhere",
        {"containers": [container("a"), container("b")], "resources": {"requests": {"memory": "1Gi"}}},
        {"memory": GI},
        (200, GI),
        (200, 400 * MI),
    ),
    # The fidelity run's p148 (1.34): memory named by a container, cpu by the sidecar and the pod
    # level. Node: cpu 1 (pod level), memory main 1Gi + sidecar 2Gi. Scored: main (100m default, 1Gi)
    # + sidecar (1, 2Gi).
    (
        "cpu-only-with-a-sidecar",
        {
            "containers": [container("main", {"memory": "1Gi"})],
            "initContainers": [sidecar("side", {"cpu": "1", "memory": "2Gi"})],
            "resources": {"requests": {"cpu": "1"}},
        },
        {"cpu": 1000, "memory": 3 * GI},
        (1000, 3 * GI),
        (1100, 3 * GI),
    ),
    # The fidelity run's p062: only the sidecar requests, the pod level repeats it (1.37's
    # API server fills in the cpu). Node: (100m, 1Gi). Scored: main's defaults (100m, 200Mi) + the sidecar.
    (
        "sidecar-alone-requests",
        {
            "containers": [container("main")],
            "initContainers": [sidecar("side", {"cpu": "100m", "memory": "1Gi"})],
            "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}},
        },
        {"cpu": 100, "memory": GI},
        (100, GI),
        (200, GI + 200 * MI),
    ),
    # A sidecar and a plain init container after it, memory at the pod level.
    # Node (no defaults: every resource is named): regular phase main 500m + sidecar 250m = 750m,
    # 300Mi; init phase sidecar + init = 2250m, 1Gi + 300Mi -> cpu 2250m; memory the pod level 2Gi.
    # Scored (defaults per container): regular (500m + 250m, 200Mi + 300Mi) = (750m, 500Mi); init
    # phase (250m + 2, 300Mi + 1Gi) = (2250m, 1324Mi) -> (2250m, 1324Mi).
    (
        "sidecar-then-init-memory-at-the-pod-level",
        {
            "containers": [container("main", {"cpu": "500m"})],
            "initContainers": [
                sidecar("side", {"cpu": "250m", "memory": "300Mi"}),
                container("init", {"cpu": "2", "memory": "1Gi"}),
            ],
            "resources": {"requests": {"memory": "2Gi"}},
        },
        {"cpu": 2250, "memory": 2 * GI},
        (2250, 2 * GI),
        (2250, 1324 * MI),
    ),
    # A plain init container: the pod level replaces the whole aggregate (init peak included) for the
    # node; the scored pod takes the init peak (2, 200Mi default) over main (100m default, 64Mi).
    (
        "init-peak-replaced-by-the-pod-level",
        {
            "containers": [container("main", {"memory": "64Mi"})],
            "initContainers": [container("init", {"cpu": "2"})],
            "resources": {"requests": {"cpu": "2500m", "memory": "128Mi"}},
        },
        {"cpu": 2500, "memory": 128 * MI},
        (2500, 128 * MI),
        (2000, 200 * MI),
    ),
    # The overhead is added on both sides; here it names memory, so the node fills in no memory default.
    (
        "overhead-on-both-sides",
        {
            "containers": [container("a")],
            "resources": {"requests": {"cpu": "1"}},
            "overhead": {"cpu": "250m", "memory": "64Mi"},
        },
        {"cpu": 1250, "memory": 64 * MI},
        (1250, 64 * MI),
        (350, 264 * MI),
    ),
    # Pod-level limits alone: the API server defaults the pod-level requests to them.
    (
        "pod-level-limits-alone",
        {"containers": [container("a")], "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
        {"cpu": 2000, "memory": GI},
        (2000, GI),
        (100, 200 * MI),
    ),
    # No pod level (every release before 1.34): both sides count every container's defaults.
    (
        "no-pod-level",
        {
            "containers": [container("a"), container("b", {"cpu": "1"})],
            "initContainers": [container("i", {"memory": "1Gi"})],
        },
        {"cpu": 1000, "memory": GI},
        (1100, GI),
        (1100, GI),
    ),
]


@pytest.mark.parametrize(
    ("spec", "requests", "on_node", "scored"), [pytest.param(*case[1:], id=case[0]) for case in CASES]
)
def test_pod_resources_count_pod_level_requests_kube_schedulers_two_ways(
    spec: dict[str, Any], requests: dict[str, int], on_node: tuple[int, int], scored: tuple[int, int]
) -> None:
    resources = pod_resources(spec)
    assert resources.requests == requests
    assert (resources.nonzero_cpu, resources.nonzero_memory) == on_node
    assert (resources.score_nonzero or on_node) == scored
    # score_nonzero is kept only where it differs (records and equivalence classes stay small).
    assert (resources.score_nonzero is None) == (scored == on_node)


@pytest.mark.parametrize(
    ("spec", "requests", "on_node", "scored"), [pytest.param(*case[1:], id=case[0]) for case in CASES]
)
def test_fit_terms_count_the_scored_pair_balanced_terms_the_requests(
    spec: dict[str, Any], requests: dict[str, int], on_node: tuple[int, int], scored: tuple[int, int]
) -> None:
    pod = incoming(spec)
    fit_terms = resource_terms(pod, {"cpu": 1, "memory": 1}, nonzero=True)
    assert tuple(request for _name, _w, request, _kind in fit_terms) == scored
    balanced_terms = resource_terms(pod, {"cpu": 1, "memory": 1}, nonzero=False)
    assert tuple(request for _name, _w, request, _kind in balanced_terms) == (
        requests.get("cpu", 0),
        requests.get("memory", 0),
    )


def test_a_resized_pods_status_is_not_what_fit_scores() -> None:
    """Fit's scorer reads no status either: a pod whose kubelet allocated more than its spec adds
    the allocated amount to its node, but would be scored for its spec."""
    spec = {"containers": [container("c", {"cpu": "1"})]}
    status = {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "3"}}]}
    resources = pod_resources(spec, status)
    assert (resources.nonzero_cpu, resources.nonzero_memory) == (3000, 200 * MI)
    assert resources.score_nonzero == (1000, 200 * MI)
    # a status repeating the spec changes nothing
    same = {
        "containerStatuses": [
            {"name": "c", "allocatedResources": {"cpu": "1"}, "resources": {"requests": {"cpu": "1"}}}
        ]
    }
    assert pod_resources(spec, same).score_nonzero is None


# ------------------------------------------------------------------------------------- scores
P002 = CASES[0][1]
SIDECAR_THEN_INIT = CASES[6][1]


def test_least_requested_on_an_empty_node_scores_the_containers_not_the_pod_level() -> None:
    """The fidelity run's p002 on an empty 8-cpu 4Gi node: kube-scheduler logged 92.

    Scored (100m, 512Mi): cpu (8000 - 100) / 8000 * 10 = 9.875, memory (4096 - 512) / 4096 * 10 = 8.75
    -> 9.3125 (kube-scheduler truncates 98 and 87 -> 92). The pod level (1100m, 768Mi) would give 8.375.
    """
    node = make_node("n1", allocatable={"cpu": "8", "memory": "4Gi", "pods": "110"})
    raw, _ = run("LeastRequested", incoming(P002), [node], ctx=CPU_MEMORY)
    assert raw["n1"] == pytest.approx((9.875 + 8.75) / 2)


def test_placed_pods_add_their_pod_level_requests_to_the_node() -> None:
    """A node of 4 cpu, 8Gi holding p002 (node side 1100m, 768Mi) and the sidecar/init pod (2250m, 2Gi);
    the incoming pod requests 500m and nothing for memory (200Mi default).

    LeastRequested: cpu (4000 - 1100 - 2250 - 500) / 4000 * 10 = 0.375, memory
    (8192 - 768 - 2048 - 200) / 8192 * 10 = 6.318359375.
    MostRequested: cpu 3850 / 4000 * 10 = 9.625, memory 3016 / 8192 * 10 = 3.681640625.
    """
    pods = [placed("p002", P002), placed("side", SIDECAR_THEN_INIT)]
    node = make_node("n1", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"}, pods=pods)
    assert (node.nonzero_cpu, node.nonzero_memory) == (3350, 2816 * MI)
    pod = incoming({"containers": [container("c", {"cpu": "500m"})]})
    least, _ = run("LeastRequested", pod, [node], ctx=CPU_MEMORY)
    assert least["n1"] == pytest.approx((0.375 + 6.318359375) / 2)
    most, _ = run("MostRequested", pod, [node], ctx=CPU_MEMORY)
    assert most["n1"] == pytest.approx((9.625 + 3.681640625) / 2)


def test_the_engine_scores_the_same_through_the_summary_rows() -> None:
    """engine.explain reads the nodes' rows from the cluster summary (the vector path).

    Node n1 (8 cpu, 16Gi) holds the sidecar/init pod (2250m, 2Gi); n2 (3 cpu, 4Gi) holds nothing.
    The incoming sidecar/init pod is scored for (2250m, 1324Mi), not its pod level (2250m, 2Gi):
    n1 cpu (8000 - 4500) / 8000 * 10 = 4.375, memory (16384 - 2048 - 1324) / 16384 * 10 = 7.94189453125;
    n2 cpu (3000 - 2250) / 3000 * 10 = 2.5, memory (4096 - 1324) / 4096 * 10 = 6.767578125.
    """
    n1 = make_node(
        "n1", allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"}, pods=[placed("side", SIDECAR_THEN_INIT)]
    )
    n2 = make_node("n2", allocatable={"cpu": "3", "memory": "4Gi", "pods": "110"})
    snapshot = Snapshot(nodes={"n1": n1, "n2": n2})
    explained = engine.explain(default_policy(), incoming(SIDECAR_THEN_INIT), snapshot, ["n1", "n2"])["nodes"]
    assert explained["n1"]["priorities"]["LeastRequested"]["raw"] == pytest.approx((4.375 + 7.94189453125) / 2)
    assert explained["n2"]["priorities"]["LeastRequested"]["raw"] == pytest.approx((2.5 + 6.767578125) / 2)
