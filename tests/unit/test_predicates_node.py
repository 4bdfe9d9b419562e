"""Node-local predicates: host name, selector/affinity, taints, unschedulable, conditions, pressure."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.gen_cluster import make_node, make_pod, run_predicate

SELECTOR_FAIL = Verdict(False, "node(s) didn't match Pod's node affinity/selector", True)


def test_pod_fits_host() -> None:
    fail = Verdict(False, "node(s) didn't match the requested node name", True)
    assert run_predicate("PodFitsHost", make_pod(), make_node("n1")) == Verdict(True)
    assert run_predicate("PodFitsHost", make_pod(node_name="n1"), make_node("n1")) == Verdict(True)
    assert run_predicate("PodFitsHost", make_pod(node_name="n2"), make_node("n1")) == fail


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": op}
    if values:
        req["values"] = list(values)
    return {"matchExpressions": [req]}


NODE_LABELS = {"zone": "z1", "disk": "ssd", "cores": "8"}


@pytest.mark.parametrize(
    ("spec", "fit"),
    [
        ({}, True),
        ({"nodeSelector": {"disk": "ssd"}}, True),
        ({"nodeSelector": {"disk": "hdd"}}, False),
        ({"nodeSelector": {"disk": "ssd", "zone": "z2"}}, False),
        ({"affinity": _affinity(_expr("zone", "In", "z1", "z2"))}, True),
        ({"affinity": _affinity(_expr("zone", "NotIn", "z1"))}, False),
        ({"affinity": _affinity(_expr("gpu", "Exists"))}, False),
        ({"affinity": _affinity(_expr("gpu", "DoesNotExist"))}, True),
        ({"affinity": _affinity(_expr("cores", "Gt", "4"))}, True),
        ({"affinity": _affinity(_expr("cores", "Lt", "4"))}, False),
        ({"affinity": _affinity(_expr("zone", "In", "z9"), _expr("disk", "In", "ssd"))}, True),  # terms ORed
        ({"affinity": _affinity()}, False),  # empty term list matches nothing
        ({"affinity": _affinity({})}, False),  # an empty term matches nothing
        (
            {"affinity": _affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})},
            True,
        ),
        (
            {"affinity": _affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})},
            False,
        ),
        # nodeSelector and node affinity must both hold.
        ({"nodeSelector": {"disk": "hdd"}, "affinity": _affinity(_expr("zone", "In", "z1"))}, False),
        ({"nodeSelector": {"disk": "ssd"}, "affinity": _affinity(_expr("zone", "In", "z1"))}, True),
        ({"affinity": {"nodeAffinity": {}}}, True),
    ],
)
def test_match_node_selector(spec: dict[str, Any], fit: bool) -> None:
    verdict = run_predicate("MatchNodeSelector", make_pod(spec=spec), make_node("n1", labels=NODE_LABELS))
    assert verdict == (Verdict(True) if fit else SELECTOR_FAIL)


@pytest.mark.parametrize(
    ("taints", "tolerations", "reason"),
    [
        ([], [], ""),
        ([{"key": "k", "value": "v", "effect": "PreferNoSchedule"}], [], ""),
        ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [], "node(s) had untolerated taint {k: v}"),
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [], "node(s) had untolerated taint {k: v}"),
        ([{"key": "k", "effect": "NoSchedule"}], [], "node(s) had untolerated taint {k: }"),
        ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [{"key": "k", "operator": "Equal", "value": "v"}], ""),
        (
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            [{"key": "k", "operator": "Equal", "value": "w"}],
            "node(s) had untolerated taint {k: v}",
        ),
        ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [{"key": "k", "operator": "Exists"}], ""),
        (
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
            "node(s) had untolerated taint {k: v}",
        ),
        ([{"key": "k", "value": "v", "effect": "NoExecute"}], [{"operator": "Exists"}], ""),
        (
            [{"key": "a", "value": "1", "effect": "NoSchedule"}, {"key": "b", "value": "2", "effect": "NoSchedule"}],
            [{"key": "a", "operator": "Exists"}],
            "node(s) had untolerated taint {b: 2}",
        ),
    ],
)
def test_pod_tolerates_node_taints(
    taints: list[dict[str, str]], tolerations: list[dict[str, Any]], reason: str
) -> None:
    verdict = run_predicate(
        "PodToleratesNodeTaints", make_pod(spec={"tolerations": tolerations}), make_node(taints=taints)
    )
    assert verdict == (Verdict(True) if not reason else Verdict(False, reason, True))


def test_check_node_unschedulable() -> None:
    fail = Verdict(False, "node(s) were unschedulable", True)
    assert run_predicate("CheckNodeUnschedulable", make_pod(), make_node()) == Verdict(True)
    assert run_predicate("CheckNodeUnschedulable", make_pod(), make_node(unschedulable=True)) == fail
    tolerating = make_pod(
        spec={
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
        }
    )
    assert run_predicate("CheckNodeUnschedulable", tolerating, make_node(unschedulable=True)) == Verdict(True)
    wrong_effect = make_pod(
        spec={"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]}
    )
    assert run_predicate("CheckNodeUnschedulable", wrong_effect, make_node(unschedulable=True)) == fail


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
