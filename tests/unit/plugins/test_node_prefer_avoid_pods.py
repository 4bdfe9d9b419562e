"""NodePreferAvoidPods: the node annotation naming controllers whose pods should go elsewhere."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extenders.plugins.node_prefer_avoid_pods import avoided_controllers
from tests.unit.plugins.node_facts import node, pod
from tests.unit.plugins.scoring import run


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
