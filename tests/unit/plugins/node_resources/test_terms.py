"""The per-node resource rows shared by the resource scorers follow the snapshot's nodes."""

from __future__ import annotations

import pytest

from extenders import engine
from extenders.plugins.node_resources.terms import resource_rows, resource_terms
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from tests.gen_cluster import make_node, make_pod


def test_resource_rows_follow_pods_added_in_place() -> None:
    node = make_node("n0", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})
    snapshot = Snapshot(nodes={"n0": node})
    pod = make_pod("in", requests={"cpu": "1", "memory": "1Gi"})
    terms = resource_terms(pod, {"cpu": 1, "memory": 1}, nonzero=False)
    assert resource_rows(snapshot.summary(), terms)["n0"] == (4000, 0, 8 * 2**30, 0)
    node.add_pod(make_pod("old", node_name="n0", requests={"cpu": "2", "memory": "2Gi"}))
    assert resource_rows(snapshot.summary(), terms)["n0"] == (4000, 2000, 8 * 2**30, 2 * 2**30)
    # and the engine scores with the new row: LeastRequested ((4-3)/4 + (8-3)/8) * 10 / 2
    scores = engine.explain(default_policy(), pod, snapshot, ["n0"])["nodes"]["n0"]["priorities"]
    assert scores["LeastRequested"]["raw"] == pytest.approx((2.5 + 6.25) / 2)
