"""The README's demo command, run as users run it: a gang placed through the real kube-scheduler."""

from __future__ import annotations

import subprocess

import orjson
import pytest

from devstack.demo import GANG, MEMBERS, render
from devstack.releases import Release
from devstack.replica import REPO

pytestmark = pytest.mark.e2e


def test_the_demo_places_its_gang_and_shows_status_and_events(kube_release: Release) -> None:
    done = subprocess.run(
        [str(REPO / "scripts" / "demo.sh"), "--json", "--kube-version", kube_release.version],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = orjson.loads(done.stdout)
    placement = result["placement"]
    members = [f"{GANG}-{i}" for i in range(MEMBERS)]
    assert sorted(placement) == members
    # each member needs 3 of a node's 4 CPUs: one per node, every node used
    assert sorted(placement.values()) == sorted(result["nodes"])
    status = result["podgroup_status"]
    assert (status["phase"], status["scheduled"], status["failed"]) == ("Scheduled", MEMBERS, 0)
    permitted = {e["object"] for e in result["events"] if e["reason"] == "GangPermitted"}
    assert permitted == {f"PodGroup/{GANG}", *(f"Pod/{m}" for m in members)}
    assert all(e["type"] == "Normal" for e in result["events"])
    # what the text report prints for the same run
    report = render(result)
    for member, node in placement.items():
        assert f"{member:<12} -> {node}" in report
    assert "phase Scheduled  scheduled 4" in report
