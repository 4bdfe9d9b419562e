"""NodeUnschedulable: cordoned nodes, unless the pod tolerates the unschedulable taint."""

from __future__ import annotations

from extenders.plugins.framework import Verdict
from tests.plugin_cases import make_node, make_pod, run_predicate


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
