"""NodeAffinity, TaintToleration, ImageLocality and NodePreferAvoidPods: scores from node facts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extenders.convert import node_facts, pod_info
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.image_locality import image_priority, normalized_image_name
from extenders.plugins.node_prefer_avoid_pods import avoided_controllers
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot

MIB = 2**20
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


# ------------------------------------------------------------------ NodeAffinity
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


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


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


# ------------------------------------------------------------------ TaintToleration
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


# ------------------------------------------------------------------ ImageLocality
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost:5000/app:v2", "localhost:5000/app:v2"),
        ("nginx@sha256:0123abcd", "nginx@sha256:0123abcd"),
        ("docker.io/library/nginx", "docker.io/library/nginx:latest"),
    ],
)
def test_normalized_image_name(name: str, expected: str) -> None:
    assert normalized_image_name(name) == expected


def _containers(*images: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}


def test_image_locality_weights_size_by_spread() -> None:
    incoming = pod(_containers("nginx", "localhost:5000/app"))
    nodes = [
        node(
            "n1",
            images=[
                (["nginx:latest", "docker.io/library/nginx:latest"], 300 * MIB),
                (["localhost:5000/app:latest"], 500 * MIB),
            ],
        ),
        node("n2", images=[(["nginx:latest"], 300 * MIB)]),
        node("n3"),
        node("n4", images=[(["nginx:1.25"], 300 * MIB)]),  # another tag is another image
    ]
    raw, normalized = run("ImageLocality", incoming, nodes)
    # nginx on 2 of 4 nodes, app on 1 of 4; two containers -> max threshold 2000 MiB
    n1 = 10 * (300 * 0.5 + 500 * 0.25 - 23) / (2000 - 23)
    n2 = 10 * (300 * 0.5 - 23) / (2000 - 23)
    assert raw == pytest.approx({"n1": n1, "n2": n2, "n3": 0.0, "n4": 0.0})
    assert normalized == pytest.approx(raw)


def test_image_locality_spread_counts_every_node_in_the_snapshot() -> None:
    incoming = pod(_containers("big:v1"))
    candidate = node("n1", images=[(["big:v1"], 800 * MIB)])
    others = [node("n2", images=[(["big:v1"], 800 * MIB)]), node("n3"), node("n4")]
    raw, _ = run("ImageLocality", incoming, [candidate], extra=others)
    # present on 2 of 4 nodes: 400 MiB of a 1000 MiB single-container range
    assert raw["n1"] == pytest.approx(10 * (400 - 23) / (1000 - 23))


@pytest.mark.parametrize(
    ("size_mib", "expected"),
    [(4000, 10.0), (1000, 10.0), (20, 0.0), (23, 0.0), (511.5, 5.0)],
)
def test_image_locality_clamps(size_mib: float, expected: float) -> None:
    incoming = pod(_containers("img:v1"))
    raw, _ = run("ImageLocality", incoming, [node("n1", images=[(["img:v1"], int(size_mib * MIB))])])
    assert raw["n1"] == pytest.approx(expected)


def test_image_locality_without_images() -> None:
    assert image_priority(500 * MIB, 0) == 0.0
    raw, normalized = run("ImageLocality", pod(_containers("nginx")), [node("n1"), node("n2")])
    assert raw == {"n1": 0.0, "n2": 0.0}
    assert normalized == {"n1": 0.0, "n2": 0.0}


# ------------------------------------------------------------------ NodePreferAvoidPods
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
