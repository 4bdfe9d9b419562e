"""Least- and most-requested scoring, one scorer parameterised two ways."""

from __future__ import annotations

import pytest

from extenders.model import NodeInfo
from extenders.plugins.framework import ScoringContext
from tests.unit.plugins.node_resources.requests import GPU, assemble, node, pod
from tests.unit.plugins.scoring import run

GPU_ONLY = {"cpu": "0", "memory": "0", "gpu": "3"}


# name, node allocatable, requests of pods already there, incoming requests, weights, expected score
LEAST_CASES: list[tuple[str, dict[str, str], list[dict[str, str]], dict[str, str], dict[str, int], float]] = [
    # cpu (4000-1500)/4000*10 = 6.25; memory (8-4)/8*10 = 5 -> mean 5.625
    (
        "plain",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "2Gi"}],
        {"cpu": "500m", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        5.625,
    ),
    # weights 3:1 -> (6.25*3 + 5) / 4
    (
        "weighted",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "2Gi"}],
        {"cpu": "500m", "memory": "2Gi"},
        {"cpu": 3, "memory": 1},
        5.9375,
    ),
    # incoming requests nothing: non-zero defaults 100m / 200Mi -> cpu 9, memory 8
    ("nonzero defaults", {"cpu": "1", "memory": "1000Mi"}, [], {}, {"cpu": 1, "memory": 1}, 8.5),
    # an existing best-effort pod also counts with the defaults: cpu 8, memory 6
    ("nonzero existing", {"cpu": "1", "memory": "1000Mi"}, [{}], {}, {"cpu": 1, "memory": 1}, 7.0),
    # cpu over-committed scores 0 for that resource; memory (8-1)/8*10 = 8.75
    (
        "overcommit",
        {"cpu": "2", "memory": "8Gi"},
        [{"cpu": "3", "memory": "512Mi"}],
        {"cpu": "1", "memory": "512Mi"},
        {"cpu": 1, "memory": 1},
        4.375,
    ),
    # node reports no memory: only cpu is scored, (2000-500)/2000*10
    ("missing resource", {"cpu": "2"}, [], {"cpu": "500m", "memory": "1Gi"}, {"cpu": 1, "memory": 1}, 7.5),
    ("zero allocatable", {}, [], {"cpu": "500m"}, {"cpu": 1, "memory": 1}, 0.0),
    # gpu weight 2, (8-4)/8*10 = 5; cpu 7.5, memory 7.5 -> (7.5 + 7.5 + 10) / 4
    # (the gpu pod requests an explicit 0 cpu/memory, which stays 0: no non-zero default)
    (
        "extended",
        {"cpu": "2", "memory": "4Gi", "gpu": "8"},
        [GPU_ONLY],
        {"cpu": "500m", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 2},
        6.25,
    ),
    # without the explicit zeros the gpu pod counts 100m / 200Mi: cpu 8, memory (4096-1224)/4096*10
    (
        "extended defaults",
        {"cpu": "2", "memory": "4Gi", "gpu": "8"},
        [{"gpu": "3"}],
        {"cpu": "300m", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 2},
        (8 + (4096 - 1224) / 4096 * 10 + 10) / 4,
    ),
    # pod without gpu: the gpu term is dropped, like kube-scheduler does for unrequested scalar resources
    (
        "extended not requested",
        {"cpu": "2", "memory": "4Gi", "gpu": "8"},
        [GPU_ONLY],
        {"cpu": "500m", "memory": "1Gi"},
        {"cpu": 1, "memory": 1, GPU: 2},
        7.5,
    ),
    # zero weight disables a resource; pods is never scored
    (
        "zero weight",
        {"cpu": "4", "memory": "8Gi", "pods": "110"},
        [],
        {"cpu": "1", "memory": "4Gi"},
        {"cpu": 0, "memory": 1, "pods": 5},
        5.0,
    ),
]


MOST_CASES: list[tuple[str, dict[str, str], list[dict[str, str]], dict[str, str], dict[str, int], float]] = [
    # cpu 1500/4000*10 = 3.75, memory 4/8*10 = 5
    (
        "plain",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "2Gi"}],
        {"cpu": "500m", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        4.375,
    ),
    (
        "weighted",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "2Gi"}],
        {"cpu": "500m", "memory": "2Gi"},
        {"cpu": 1, "memory": 3},
        4.6875,
    ),
    # over-commit counts as full: cpu 10, memory 1/8*10
    (
        "overcommit",
        {"cpu": "2", "memory": "8Gi"},
        [{"cpu": "3", "memory": "512Mi"}],
        {"cpu": "1", "memory": "512Mi"},
        {"cpu": 1, "memory": 1},
        5.625,
    ),
    ("nonzero defaults", {"cpu": "1", "memory": "1000Mi"}, [], {}, {"cpu": 1, "memory": 1}, 1.5),
    ("missing resource", {"cpu": "2"}, [], {"cpu": "500m", "memory": "1Gi"}, {"cpu": 1, "memory": 1}, 2.5),
    ("zero allocatable", {}, [], {"cpu": "500m"}, {"cpu": 1, "memory": 1}, 0.0),
    # gpu (3+1)/8*10 = 5 with weight 2; cpu 2.5, memory 2.5 -> (2.5 + 2.5 + 10) / 4
    (
        "extended",
        {"cpu": "2", "memory": "4Gi", "gpu": "8"},
        [GPU_ONLY],
        {"cpu": "500m", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 2},
        3.75,
    ),
    # a node without the resource skips it: only cpu and memory count
    (
        "extended missing on node",
        {"cpu": "2", "memory": "4Gi"},
        [],
        {"cpu": "500m", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 2},
        2.5,
    ),
]


@pytest.mark.parametrize(
    ("scorer", "case", "alloc", "existing", "incoming", "weights", "expected"),
    [("LeastRequested", *c) for c in LEAST_CASES] + [("MostRequested", *c) for c in MOST_CASES],
)
def test_requested(
    scorer: str,
    case: str,
    alloc: dict[str, str],
    existing: list[dict[str, str]],
    incoming: dict[str, str],
    weights: dict[str, int],
    expected: float,
) -> None:
    incoming_pod, info = assemble(alloc, existing, incoming)
    raw, normalized = run(scorer, incoming_pod, [info], ctx=ScoringContext(resource_weights=weights))
    assert raw["n1"] == pytest.approx(expected)
    assert normalized["n1"] == pytest.approx(expected)


def test_gpu_bin_packing_prefers_the_fuller_gpu_node() -> None:
    weights = ScoringContext(resource_weights={"cpu": 1, "memory": 1, GPU: 5})
    big = {"cpu": "32", "memory": "128Gi", "gpu": "8"}
    busy = node("busy", big, [pod("a", {"gpu": "6"}, "busy")])
    idle = node("idle", big)
    incoming = pod("in", {"cpu": "1", "memory": "1Gi", "gpu": "1"})
    _, most = run("MostRequested", incoming, [busy, idle], ctx=weights)
    _, least = run("LeastRequested", incoming, [busy, idle], ctx=weights)
    assert most["busy"] > most["idle"]
    assert least["busy"] < least["idle"]


def test_empty_weights_fall_back_to_cpu_and_memory() -> None:
    incoming_pod, info = assemble(
        {"cpu": "4", "memory": "8Gi"}, [{"cpu": "1", "memory": "2Gi"}], {"cpu": "500m", "memory": "2Gi"}
    )
    raw, _ = run("LeastRequested", incoming_pod, [info], ctx=ScoringContext(resource_weights={}))
    assert raw["n1"] == pytest.approx(5.625)


def test_node_without_object_scores_zero() -> None:
    ghost = NodeInfo.build("ghost", None, [])
    for name in ("LeastRequested", "MostRequested", "BalancedResourceAllocation"):
        raw, _ = run(name, pod("in", {"cpu": "1"}), [ghost])
        assert raw["ghost"] == 0.0
