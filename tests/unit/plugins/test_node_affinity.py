"""NodeAffinity: the required node selector and affinity as a filter, preferred terms as a score."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.plugin_cases import make_node, make_pod, run_predicate
from tests.unit.plugins.node_facts import node, pod
from tests.unit.plugins.scoring import run

SELECTOR_FAIL = Verdict(False, "node(s) didn't match Pod's node affinity/selector", True)


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


def _preferred(*terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": w, "preference": pref} for w, pref in terms
                ]
            }
        }
    }


def test_node_affinity_sums_matching_weights_and_normalises_by_max() -> None:
    incoming = pod(
        _preferred(
            (5, _expr("zone", "In", "a")),
            (3, _expr("disk", "In", "ssd")),
            (0, _expr("zone", "In", "a")),  # weight 0 counts for nothing
            (50, {}),  # an empty preference matches no node
            (2, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}),
        )
    )
    nodes = [
        node("n1", {"zone": "a", "disk": "ssd"}),
        node("n2", {"zone": "a"}),
        node("n3", {"zone": "b"}),
        node("n4", {}),
    ]
    raw, normalized = run("NodeAffinity", incoming, nodes)
    assert raw == {"n1": 8.0, "n2": 5.0, "n3": 2.0, "n4": 0.0}
    assert normalized == pytest.approx({"n1": 10.0, "n2": 6.25, "n3": 2.5, "n4": 0.0})


def test_node_affinity_without_preferred_terms_scores_zero_everywhere() -> None:
    required = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_expr("zone", "In", "a")]}
            }
        }
    }
    for incoming in (pod(), pod(required)):
        raw, normalized = run("NodeAffinity", incoming, [node("n1", {"zone": "a"}), node("n2")])
        assert raw == {"n1": 0.0, "n2": 0.0}
        assert normalized == {"n1": 0.0, "n2": 0.0}
