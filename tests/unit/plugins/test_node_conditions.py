"""The classic CheckNodeCondition and node-pressure predicates, and why the default policy leaves them out."""

from __future__ import annotations

from typing import Any

import pytest

from extenders import engine
from extenders.plugins.framework import Verdict
from extenders.policy import default_policy, parse_policy
from tests.plugin_cases import make_node, make_pod, make_snapshot, run_predicate


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


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "value": "", "effect": "NoSchedule"}
CNI_POD = make_pod(
    "cni",
    spec={"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]},
)


@pytest.mark.parametrize(
    ("conditions", "taints", "pod", "passes_by_default", "passes_classic"),
    [
        # A condition without the lifecycle controller's taint: kube-scheduler does not look at it.
        ({"Ready": "False"}, [], make_pod("plain"), True, False),
        ({"Ready": "True", "MemoryPressure": "True"}, [], BEST_EFFORT, True, False),
        ({"Ready": "True", "NetworkUnavailable": "True"}, [], make_pod("plain"), True, False),
        # The taint is what keeps ordinary pods off a node that is not ready ...
        ({"Ready": "False"}, [NOT_READY_TAINT], make_pod("plain"), False, False),
        # ... and what lets the network plugin's pod onto the new node that needs it to become Ready.
        ({"Ready": "False"}, [NOT_READY_TAINT], CNI_POD, True, False),
    ],
)
def test_the_default_policy_reads_taints_not_conditions(
    conditions: dict[str, str], taints: list[dict[str, str]], pod: Any, passes_by_default: bool, passes_classic: bool
) -> None:
    node = make_node("n", conditions=conditions, taints=taints)
    snapshot = make_snapshot(node)
    default = default_policy()
    classic = parse_policy({"predicates": ["CheckNodeCondition", "CheckNodeMemoryPressure", *default.predicate_names]})
    assert bool(engine.filter_nodes(default, pod, snapshot, ["n"]).passing) is passes_by_default
    assert bool(engine.filter_nodes(classic, pod, snapshot, ["n"]).passing) is passes_classic
