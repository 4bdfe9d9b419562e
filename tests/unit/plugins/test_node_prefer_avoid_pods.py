"""NodePreferAvoidPods: the node annotation naming controllers whose pods should go elsewhere."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extenders.convert import node_facts, pod_info
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.node_prefer_avoid_pods import avoided_controllers
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot

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


def _avoid(*controllers: tuple[str, str]) -> dict[str, str]:
    doc = {
        "preferAvoidPods": [
            {
                "podSignature": {
                    "podController": {"apiVersion": "v1", "kind": kind, "name": "x", "uid": uid, "controller": True}
                },
                "reason": "maintenance",
            }
            for kind, uid in controllers
        ]
    }
    return {"scheduler.alpha.kubernetes.io/preferAvoidPods": json.dumps(doc)}


@pytest.mark.parametrize(
    ("owner", "expected_avoided"),
    [
        ({"kind": "ReplicaSet", "name": "rs", "uid": "u1"}, 0.0),
        ({"kind": "ReplicationController", "name": "rc", "uid": "u2"}, 0.0),
        ({"kind": "ReplicaSet", "name": "rs", "uid": "other"}, 10.0),
        ({"kind": "StatefulSet", "name": "ss", "uid": "u3"}, 10.0),  # only RC/RS are honoured
        ({"kind": "ReplicationController", "name": "rs", "uid": "u1"}, 10.0),  # kind must match too
        (None, 10.0),
    ],
)
def test_node_prefer_avoid_pods(owner: dict[str, Any] | None, expected_avoided: float) -> None:
    avoided = node(
        "avoid", annotations=_avoid(("ReplicaSet", "u1"), ("ReplicationController", "u2"), ("StatefulSet", "u3"))
    )
    plain = node("plain")
    broken = node("broken", annotations={"scheduler.alpha.kubernetes.io/preferAvoidPods": "{not json"})
    raw, normalized = run("NodePreferAvoidPods", pod(owner=owner), [avoided, plain, broken])
    assert raw == {"avoid": expected_avoided, "plain": 10.0, "broken": 10.0}
    assert normalized == raw


def test_avoided_controllers_tolerates_odd_documents() -> None:
    assert avoided_controllers("[]") == frozenset()
    assert avoided_controllers('{"preferAvoidPods": null}') == frozenset()
    assert avoided_controllers('{"preferAvoidPods": [{"podSignature": {}}]}') == frozenset()
