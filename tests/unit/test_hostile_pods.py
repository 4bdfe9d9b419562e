"""Seeded mutations of valid pods: each is either refused by the wire types or evaluated without error.

Whatever passes validation must never make a predicate or priority raise (that would be a 500).
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from pydantic import ValidationError

from app.kube_types import Pod
from app.translate import BadRequest, pod_info
from extenders import engine
from extenders.policy import default_policy
from tests import gen_cluster

JUNK: list[Any] = ["x", 5, -1, 1.5, None, True, [], {}, ["a"], {"a": 1}, [{"a": None}], "", {"key": 1}, [1, 2]]


def _mutate(rng: random.Random, obj: Any, depth: int = 0) -> None:
    if isinstance(obj, dict) and obj:
        key = rng.choice(list(obj))
        if rng.random() < 0.5 or depth > 6:
            obj[key] = copy.deepcopy(rng.choice(JUNK))
        else:
            _mutate(rng, obj[key], depth + 1)
    elif isinstance(obj, list) and obj:
        index = rng.randrange(len(obj))
        if rng.random() < 0.5 or depth > 6:
            obj[index] = copy.deepcopy(rng.choice(JUNK))
        else:
            _mutate(rng, obj[index], depth + 1)


@pytest.mark.parametrize("block", range(4))
def test_mutated_pods_are_refused_or_evaluated(block: int) -> None:
    policy = default_policy()
    evaluated = refused = 0
    for seed in range(block * 150, (block + 1) * 150):
        rng = random.Random(seed)
        cluster = gen_cluster.gen_cluster(rng)
        snapshot = gen_cluster.build_snapshot(cluster)
        raw = gen_cluster.gen_incoming_pod(rng, cluster)
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, raw)
        try:
            pod = pod_info(Pod.model_validate(raw))
        except (ValidationError, BadRequest):
            refused += 1
            continue
        names = gen_cluster.candidate_names(rng, cluster)
        engine.filter_nodes(policy, pod, snapshot, names)
        engine.prioritize_nodes(policy, pod, snapshot, names)
        engine.explain(policy, pod, snapshot, names)
        evaluated += 1
    # Both outcomes must occur, or the mutations test nothing.
    assert evaluated > 10 and refused > 10


@pytest.mark.parametrize(
    ("where", "junk"),
    [
        (("spec", "resources"), "x"),
        (("spec", "resources"), {"requests": {"cpu": ["1"]}}),
        (("spec", "volumes"), [{"name": "v", "image": "ref"}]),
        (("spec", "volumes"), [{"name": "v", "image": {"reference": 5}}]),
        (("status", "containerStatuses"), [{"name": "c", "allocatedResources": {"cpu": None}}]),
        (("status", "containerStatuses"), [{"name": "c", "resources": {"requests": "x"}}]),
        (("status", "initContainerStatuses"), {"name": "c"}),
        (("status", "conditions"), [{"type": "PodResizePending", "reason": 3}]),
        (("status", "allocatedResources"), ["cpu"]),
        (("status", "resources"), {"requests": {"cpu": {}}}),
    ],
)
def test_resource_and_status_fields_are_typed(where: tuple[str, str], junk: Any) -> None:
    """What pod-level resources, image volumes and resizes are read from is refused when malformed."""
    section, key = where
    raw: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {}}
    raw[section][key] = junk
    with pytest.raises(ValidationError):
        Pod.model_validate(raw)


def test_resource_and_status_fields_reach_the_engine() -> None:
    raw = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "1"}}}],
            "resources": {"requests": {"memory": "1Gi"}},
            "volumes": [{"name": "m", "image": {"reference": "model:1"}}],
        },
        "status": {
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
            "containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "2"}, "ready": True}],
        },
    }
    pod = pod_info(Pod.model_validate(raw))
    assert pod.requests == {"cpu": 2000, "memory": 2**30}
    assert pod.images == ["app:1", "model:1"]
