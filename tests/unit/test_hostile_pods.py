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
from app.service import BadRequest, pod_info
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
