"""The classic CheckNodeCondition and node-pressure predicates."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.gen_cluster import make_node, make_pod, run_predicate


@pytest.mark.parametrize(
    ("conditions", "reason"),
    [
        ({"Ready": "True"}, ""),
        ({}, ""),  # no Ready condition reported: passes, as the classic predicate did
        ({"Ready": "False"}, "node(s) were not ready"),
        ({"Ready": "Unknown"}, "node(s) were not ready"),
        ({"Ready": "True", "NetworkUnavailable": "True"}, "node(s) had unavailable network"),
        ({"Ready": "True", "NetworkUnavailable": "False"}, ""),
        ({"Ready": "False", "NetworkUnavailable": "True"}, "node(s) were not ready, node(s) had unavailable network"),
    ],
)
def test_check_node_condition(conditions: dict[str, str], reason: str) -> None:
    verdict = run_predicate("CheckNodeCondition", make_pod(), make_node(conditions=conditions))
    assert verdict == (Verdict(True) if not reason else Verdict(False, reason, True))


BEST_EFFORT = make_pod("be")


BURSTABLE = make_pod("bu", requests={"cpu": "100m"})


@pytest.mark.parametrize(
    ("predicate", "condition", "pod", "reason"),
    [
        ("CheckNodeMemoryPressure", "MemoryPressure", BEST_EFFORT, "node(s) had memory pressure"),
        ("CheckNodeMemoryPressure", "MemoryPressure", BURSTABLE, ""),
        ("CheckNodeDiskPressure", "DiskPressure", BEST_EFFORT, "node(s) had disk pressure"),
        ("CheckNodeDiskPressure", "DiskPressure", BURSTABLE, "node(s) had disk pressure"),
        ("CheckNodePIDPressure", "PIDPressure", BURSTABLE, "node(s) had pid pressure"),
    ],
)
def test_pressure(predicate: str, condition: str, pod: Any, reason: str) -> None:
    pressured = make_node(conditions={"Ready": "True", condition: "True"})
    calm = make_node(conditions={"Ready": "True", condition: "False"})
    assert run_predicate(predicate, pod, calm) == Verdict(True)
    assert run_predicate(predicate, pod, pressured) == (Verdict(True) if not reason else Verdict(False, reason, True))


def test_pressure_is_tolerated_like_its_taint() -> None:
    key = "node.kubernetes.io/disk-pressure"
    pod = make_pod(spec={"tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]})
    node = make_node(conditions={"Ready": "True", "DiskPressure": "True"})
    assert run_predicate("CheckNodeDiskPressure", pod, node) == Verdict(True)
