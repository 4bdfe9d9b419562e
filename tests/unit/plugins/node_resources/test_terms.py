"""The per-node resource rows shared by the resource scorers follow the snapshot's nodes."""

from __future__ import annotations

from typing import Any

import pytest

from extenders import engine
from extenders.plugins.node_resources.terms import resource_rows, resource_terms
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod


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


@pytest.mark.parametrize(
    ("spec", "scored", "added"),
    [
        # Without pod-level requests both count every container's defaults: 100m + 1, 200Mi each.
        (
            {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}]},
            (1100, 400),
            (1100, 400),
        ),
        # Pod-level memory, one container naming cpu: a node's totals count that cpu alone and the
        # pod-level memory; the pod being scheduled ignores the pod level (kube-scheduler's Fit scorer
        # is never told the feature is on) and counts every container's defaults: 100m + 1, 200Mi each.
        (
            {
                "containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
                "resources": {"requests": {"memory": "1Gi"}},
            },
            (1100, 400),
            (1000, 1024),
        ),
        # Pod-level cpu and memory: a node's totals count both; the pod being scheduled, its
        # container's defaults.
        (
            {"containers": [{"name": "a"}], "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            (100, 200),
            (2000, 1024),
        ),
    ],
)
def test_the_pod_being_scheduled_counts_kube_schedulers_scoring_defaults(
    spec: dict[str, Any], scored: tuple[int, int], added: tuple[int, int]
) -> None:
    incoming = make_pod("in", spec=spec)
    terms = resource_terms(incoming, {"cpu": 1, "memory": 1}, nonzero=True)
    assert [(name, request // (2**20 if name == "memory" else 1)) for name, _w, request, _k in terms] == [
        ("cpu", scored[0]),
        ("memory", scored[1]),
    ]
    node = make_node("n0", pods=[make_pod("placed", node_name="n0", spec=spec)])
    assert (node.nonzero_cpu, node.nonzero_memory // 2**20) == added
