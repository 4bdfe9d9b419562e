"""PodGroup phase and counts from the group's pods and its gang state."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.gang.podgroup_status import podgroup_status


def pod(phase: str = "Pending", node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pods", "state", "phase", "counts"),
    [
        ([pod(), pod()], "waiting", "Pending", (0, 0, 0, 0)),
        ([pod(), pod()], "assembling", "Scheduling", (0, 0, 0, 0)),
        ([pod(node="n1"), pod()], "waiting", "Scheduling", (1, 0, 0, 0)),
        ([pod(node="n1"), pod(node="n2")], "permitted", "Scheduled", (2, 0, 0, 0)),
        ([pod("Running", "n1"), pod(node="n2")], "permitted", "Scheduled", (2, 1, 0, 0)),
        ([pod("Running", "n1"), pod("Running", "n2")], "permitted", "Running", (2, 2, 0, 0)),
        ([pod("Succeeded", "n1"), pod("Running", "n2")], "permitted", "Running", (2, 1, 1, 0)),
        ([pod("Succeeded", "n1"), pod("Succeeded", "n2")], "permitted", "Finished", (2, 0, 2, 0)),
        ([pod("Failed", "n1"), pod("Running", "n2")], "permitted", "Failed", (2, 1, 0, 1)),
        # A rejected gang's members are back to pending: nothing scheduled.
        ([pod(), pod()], "cooling", "Pending", (0, 0, 0, 0)),
        # Pods being deleted no longer count.
        ([pod("Running", "n1", deleting=True), pod("Running", "n2")], "permitted", "Scheduling", (1, 1, 0, 0)),
    ],
)
def test_phase_and_counts(pods: list[dict[str, Any]], state: str, phase: str, counts: tuple[int, ...]) -> None:
    status = podgroup_status(2, pods, state)
    assert status["phase"] == phase
    assert (status["scheduled"], status["running"], status["succeeded"], status["failed"]) == counts
