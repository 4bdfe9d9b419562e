"""TaintToleration: untolerated NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.convert import node_facts, pod_info
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext, Verdict
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot
from tests.gen_cluster import make_node, make_pod, run_predicate


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


CTX = ScoringContext(resource_weights={"cpu": 1, "memory": 1})


def pod(spec: dict[str, Any] | None = None, owner: dict[str, Any] | None = None) -> PodInfo:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **(spec or {})}
    meta: dict[str, Any] = {"name": "in", "namespace": "default", "uid": "uid-in"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    return pod_info({"metadata": meta, "spec": body})


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    images: list[tuple[list[str], int]] | None = None,
    annotations: dict[str, str] | None = None,
) -> NodeInfo:
    facts = node_facts(
        {
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"taints": taints or []},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi"},
                "images": [{"names": names, "sizeBytes": size} for names, size in images or []],
            },
        }
    )
    return NodeInfo.build(name, facts, [])


def run(
    name: str, incoming: PodInfo, nodes: list[NodeInfo], extra: list[NodeInfo] | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """Score the candidates ``nodes``; ``extra`` nodes are in the snapshot but not candidates."""
    priority = SCORERS[name]
    snapshot = Snapshot(nodes={n.name: n for n in [*nodes, *(extra or [])]})
    state = priority.prepare(incoming, snapshot, nodes, CTX)
    raw = {n.name: priority.score(incoming, n, state, CTX) for n in nodes}
    return raw, priority.normalize(raw, state)


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
