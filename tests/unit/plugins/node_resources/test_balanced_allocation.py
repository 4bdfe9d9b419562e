"""BalancedResourceAllocation: how evenly the pod would leave the node's resources used."""

from __future__ import annotations

import math

import pytest

from extenders.plugins.framework import ScoringContext
from extenders.plugins.node_resources.balanced_allocation import balance_score
from tests.unit.plugins.node_resources.requests import GPU, assemble, node, pod
from tests.unit.plugins.scoring import run

BALANCED_CASES: list[tuple[str, dict[str, str], list[dict[str, str]], dict[str, str], dict[str, int], float]] = [
    # cpu 2000/4000 = .5, memory 4/8 = .5 -> perfectly balanced
    (
        "balanced",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "1Gi"}],
        {"cpu": "1", "memory": "3Gi"},
        {"cpu": 1, "memory": 1},
        10.0,
    ),
    # .5 and .25 -> std .125 -> 8.75
    (
        "two resources",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "1Gi"}],
        {"cpu": "1", "memory": "1Gi"},
        {"cpu": 1, "memory": 1},
        8.75,
    ),
    # actual requests, not the non-zero defaults: the best-effort pod on the node adds nothing (.25, .25)
    (
        "actual requests",
        {"cpu": "4", "memory": "8Gi"},
        [{}],
        {"cpu": "1", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        10.0,
    ),
    # fractions capped at 1: cpu 3/2 -> 1, memory .25 -> std .375
    (
        "capped",
        {"cpu": "2", "memory": "8Gi"},
        [{"cpu": "2"}],
        {"cpu": "1", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        6.25,
    ),
    # one resource only on the node: std 0
    ("one resource", {"cpu": "2"}, [], {"cpu": "1", "memory": "2Gi"}, {"cpu": 1, "memory": 1}, 10.0),
    # three fractions .5, .25, 1 (gpu 3/2 capped): population std of them
    (
        "three resources",
        {"cpu": "4", "memory": "8Gi", "gpu": "2"},
        [{"cpu": "1", "memory": "1Gi", "gpu": "2"}],
        {"cpu": "1", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 1},
        (1 - math.sqrt(((0.5 - 1.75 / 3) ** 2 + (0.25 - 1.75 / 3) ** 2 + (1 - 1.75 / 3) ** 2) / 3)) * 10,
    ),
]


@pytest.mark.parametrize(("case", "alloc", "existing", "incoming", "weights", "expected"), BALANCED_CASES)
def test_balanced_allocation(
    case: str,
    alloc: dict[str, str],
    existing: list[dict[str, str]],
    incoming: dict[str, str],
    weights: dict[str, int],
    expected: float,
) -> None:
    incoming_pod, info = assemble(alloc, existing, incoming)
    raw, normalized = run(
        "BalancedResourceAllocation", incoming_pod, [info], ctx=ScoringContext(resource_weights=weights)
    )
    assert raw["n1"] == pytest.approx(expected)
    assert normalized["n1"] == pytest.approx(expected)


def test_balanced_skips_best_effort_pods() -> None:
    lopsided = node("n1", {"cpu": "4", "memory": "8Gi"}, [pod("e", {"cpu": "3"}, "n1")])
    raw, normalized = run("BalancedResourceAllocation", pod("in"), [lopsided])
    assert raw == {"n1": 0.0}
    assert normalized == {"n1": 0.0}


def test_balance_score_formula() -> None:
    assert balance_score([]) == 10.0
    assert balance_score([0.3]) == 10.0
    assert balance_score([0.0, 1.0]) == pytest.approx(5.0)
    assert balance_score([0.0, 0.0, 0.6]) == pytest.approx((1 - math.sqrt(0.08)) * 10)
