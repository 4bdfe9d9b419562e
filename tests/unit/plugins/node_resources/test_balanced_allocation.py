"""BalancedResourceAllocation: how evenly the pod would leave the node's resources used.

Each case's first expectation is the balance with the pod, as releases before 1.36 score it; the
second is 1.36's on: ``change_score`` of the balance with the pod and without it (the node as it is).
"""

from __future__ import annotations

import math

import pytest

from extenders.features import NEWEST, Features
from extenders.plugins.framework import ScoringContext
from extenders.plugins.node_resources.balanced_allocation import balance_score
from tests.unit.plugins.node_resources.requests import GPU, assemble, node, pod
from tests.unit.plugins.scoring import run

# Releases that score the balance with the pod: the last one and the oldest followed.
BEFORE_CHANGE = (Features(35), Features(28, 7))


def change(with_pod: float, without_pod: float) -> float:
    """1.36's score, written out: MAX/2 + (MAX/2 + with - without) / 2 with MAX = 10."""
    return 5 + (5 + with_pod - without_pod) / 2


BALANCED_CASES: list[tuple[str, dict[str, str], list[dict[str, str]], dict[str, str], dict[str, int], float, float]] = [
    # cpu 2000/4000 = .5, memory 4/8 = .5 -> perfectly balanced
    (
        "balanced",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "1Gi"}],
        {"cpu": "1", "memory": "3Gi"},
        {"cpu": 1, "memory": 1},
        10.0,
        change(10.0, 9.375),  # without the pod: .25 and .125 -> std .0625
    ),
    # .5 and .25 -> std .125 -> 8.75
    (
        "two resources",
        {"cpu": "4", "memory": "8Gi"},
        [{"cpu": "1", "memory": "1Gi"}],
        {"cpu": "1", "memory": "1Gi"},
        {"cpu": 1, "memory": 1},
        8.75,
        change(8.75, 9.375),  # without the pod: .25 and .125
    ),
    # actual requests, not the non-zero defaults: the best-effort pod on the node adds nothing (.25, .25)
    (
        "actual requests",
        {"cpu": "4", "memory": "8Gi"},
        [{}],
        {"cpu": "1", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        10.0,
        change(10.0, 10.0),  # an empty node is balanced too: 7.5
    ),
    # fractions capped at 1: cpu 3/2 -> 1, memory .25 -> std .375
    (
        "capped",
        {"cpu": "2", "memory": "8Gi"},
        [{"cpu": "2"}],
        {"cpu": "1", "memory": "2Gi"},
        {"cpu": 1, "memory": 1},
        6.25,
        change(6.25, 5.0),  # without the pod: cpu 2/2 = 1 and memory 0 -> std .5
    ),
    # one resource only on the node: std 0
    ("one resource", {"cpu": "2"}, [], {"cpu": "1", "memory": "2Gi"}, {"cpu": 1, "memory": 1}, 10.0, 7.5),
    # three fractions .5, .25, 1 (gpu 3/2 capped): population std of them
    (
        "three resources",
        {"cpu": "4", "memory": "8Gi", "gpu": "2"},
        [{"cpu": "1", "memory": "1Gi", "gpu": "2"}],
        {"cpu": "1", "memory": "1Gi", "gpu": "1"},
        {"cpu": 1, "memory": 1, GPU: 1},
        (1 - math.sqrt(((0.5 - 1.75 / 3) ** 2 + (0.25 - 1.75 / 3) ** 2 + (1 - 1.75 / 3) ** 2) / 3)) * 10,
        change(  # without the pod: .25, .125 and 1 (gpu 2/2)
            (1 - math.sqrt(((0.5 - 1.75 / 3) ** 2 + (0.25 - 1.75 / 3) ** 2 + (1 - 1.75 / 3) ** 2) / 3)) * 10,
            (1 - math.sqrt(((0.25 - 1.375 / 3) ** 2 + (0.125 - 1.375 / 3) ** 2 + (1 - 1.375 / 3) ** 2) / 3)) * 10,
        ),
    ),
]


@pytest.mark.parametrize(("case", "alloc", "existing", "incoming", "weights", "expected", "newest"), BALANCED_CASES)
def test_balanced_allocation(
    case: str,
    alloc: dict[str, str],
    existing: list[dict[str, str]],
    incoming: dict[str, str],
    weights: dict[str, int],
    expected: float,
    newest: float,
) -> None:
    incoming_pod, info = assemble(alloc, existing, incoming)
    ctx = ScoringContext(resource_weights=weights)
    for features in BEFORE_CHANGE:
        raw, normalized = run("BalancedResourceAllocation", incoming_pod, [info], ctx=ctx, features=features)
        assert raw["n1"] == pytest.approx(expected), features.name
        assert normalized["n1"] == pytest.approx(expected), features.name
    raw, normalized = run("BalancedResourceAllocation", incoming_pod, [info], ctx=ctx, features=NEWEST)
    assert raw["n1"] == pytest.approx(newest)
    assert normalized["n1"] == pytest.approx(newest)


def test_balanced_skips_best_effort_pods() -> None:
    lopsided = node("n1", {"cpu": "4", "memory": "8Gi"}, [pod("e", {"cpu": "3"}, "n1")])
    for features in (Features(33, 0), NEWEST):  # from 1.33
        raw, normalized = run("BalancedResourceAllocation", pod("in"), [lopsided], features=features)
        assert raw == {"n1": 0.0}, features.name
        assert normalized == {"n1": 0.0}, features.name
    # Before, the node's balance as it is: cpu 3/4 and memory 0 -> std .375.
    raw, normalized = run("BalancedResourceAllocation", pod("in"), [lopsided], features=Features(32))
    assert raw == normalized == {"n1": pytest.approx(6.25)}


def test_balance_score_formula() -> None:
    assert balance_score([]) == 10.0
    assert balance_score([0.3]) == 10.0
    assert balance_score([0.0, 1.0]) == pytest.approx(5.0)
    assert balance_score([0.0, 0.0, 0.6]) == pytest.approx((1 - math.sqrt(0.08)) * 10)
