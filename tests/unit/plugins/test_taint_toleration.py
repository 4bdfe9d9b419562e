"""TaintToleration: untolerated NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.features import NEWEST, Features
from extenders.plugins.framework import Verdict
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, run_predicate
from tests.unit.plugins.node_facts import node, pod
from tests.unit.plugins.scoring import run


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
    """The reasons as releases before 1.34.2 word them (the first untolerated taint named); newer
    ones fail the same nodes with the taint left out."""
    incoming, tainted = make_pod(spec={"tolerations": tolerations}), make_node(taints=taints)
    old = Snapshot(nodes={tainted.name: tainted}, features=Features(28, 7))
    verdict = run_predicate("PodToleratesNodeTaints", incoming, tainted, old)
    assert verdict == (Verdict(True) if not reason else Verdict(False, reason, True))
    newest = Snapshot(nodes={tainted.name: tainted}, features=NEWEST)
    verdict = run_predicate("PodToleratesNodeTaints", incoming, tainted, newest)
    assert verdict == (Verdict(True) if not reason else Verdict(False, "node(s) had untolerated taint(s)", True))


def _taint(key: str, effect: str = "PreferNoSchedule", value: str = "") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def test_taint_toleration_counts_untolerated_prefer_no_schedule_taints() -> None:
    incoming = pod(
        {
            "tolerations": [
                {"key": "ok", "operator": "Equal", "value": "yes", "effect": "PreferNoSchedule"},
                # a NoSchedule toleration does not help against PreferNoSchedule taints
                {"key": "hard", "operator": "Exists", "effect": "NoSchedule"},
            ]
        }
    )
    nodes = [
        node("n1", taints=[_taint("a"), _taint("b")]),
        node("n2", taints=[_taint("ok", value="yes"), _taint("hard")]),
        node("n3", taints=[_taint("x", "NoSchedule"), _taint("ok", value="yes")]),
        node("n4", taints=[_taint("ok", value="no")]),  # value mismatch: not tolerated
    ]
    raw, normalized = run("TaintToleration", incoming, nodes)
    assert raw == {"n1": 2.0, "n2": 1.0, "n3": 0.0, "n4": 1.0}
    assert normalized == pytest.approx({"n1": 0.0, "n2": 5.0, "n3": 10.0, "n4": 5.0})


def test_taint_toleration_all_tolerated_scores_max_everywhere() -> None:
    incoming = pod({"tolerations": [{"operator": "Exists"}]})
    raw, normalized = run("TaintToleration", incoming, [node("n1", taints=[_taint("a")]), node("n2")])
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 10.0, "n2": 10.0}
