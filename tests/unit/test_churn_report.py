"""The churn test's violation report: it must name the right gang's lines and members."""

from __future__ import annotations

from tests.e2e.churn_report import describe, pod_line, related_log_lines

LOGS = """--- replica-1
INFO gang e2e-1/g7 is permitted
INFO gang e2e-1/g74 preempted whole for e2e-1/g80-0
INFO requeued 2 pod(s): gang e2e-1/g7 may go on
--- kube-scheduler
I1127 "Unable to schedule pod" pod="e2e-1/g74-1" err="0/5 nodes"
I1127 "Bound" pod="e2e-1/g7-0" node="n1"
"""


def test_log_lines_name_the_gang_and_its_pods_only() -> None:
    text = related_log_lines(LOGS, ["g7"])
    assert "[replica-1] INFO gang e2e-1/g7 is permitted" in text
    assert '[kube-scheduler] I1127 "Bound" pod="e2e-1/g7-0"' in text
    assert "g74" not in text
    assert text.startswith("--- log lines naming g7 (last 60 of 3):")


def test_log_lines_keep_the_last_ones_of_each_gang() -> None:
    text = related_log_lines(LOGS, ["g74", "g7"], per_gang=1)
    assert text.splitlines() == [
        "--- log lines naming g74 (last 1 of 2):",
        '[kube-scheduler] I1127 "Unable to schedule pod" pod="e2e-1/g74-1" err="0/5 nodes"',
        "--- log lines naming g7 (last 1 of 3):",
        '[kube-scheduler] I1127 "Bound" pod="e2e-1/g7-0" node="n1"',
    ]


def test_a_member_shows_where_it_is_and_why_it_waits() -> None:
    pending = {
        "metadata": {"name": "g1-1"},
        "spec": {},
        "status": {
            "nominatedNodeName": "n2",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3"}],
        },
    }
    leaving = {
        "metadata": {"name": "g1-0", "deletionTimestamp": "2026-11-27T00:00:00Z"},
        "spec": {"nodeName": "n1"},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    assert pod_line("g1-1", pending) == "    g1-1: node=-, nominated=n2, PodScheduled=Unschedulable: 0/3"
    assert pod_line("g1-0", leaving) == "    g1-0: node=n1, deleting"
    text = describe("g1", ["g1-0", "g1-1", "g1-2"], {"g1-0": leaving, "g1-1": pending}, {"n1": 500}, None)
    assert text.splitlines()[3] == "    g1-2: gone"
    assert "extender: no document" in text and "{'n1': 500}" in text
