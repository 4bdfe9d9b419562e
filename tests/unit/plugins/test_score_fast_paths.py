"""Every scorer's fast paths (score_all, constant) agree with its plain score on random clusters."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from extenders.plugins.framework import ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.sync.convert import pod_info
from tests.gen_cluster import build_snapshot, gen_cluster, gen_incoming_pod

WEIGHTS = ({"cpu": 1, "memory": 1}, {"cpu": 2, "memory": 1, "ephemeral-storage": 1}, {"memory": 3})


PREFERRED = [{"weight": 4, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]


def _check(seed: int) -> dict[str, bool]:
    """Asserts the fast paths on one random cluster; returns, per priority, whether it was constant."""
    rng = random.Random(seed)
    cluster = gen_cluster(rng)
    snapshot = build_snapshot(cluster)
    pod = pod_info(gen_incoming_pod(rng, cluster))
    if seed % 2:
        node_affinity = {
            **(pod.affinity.get("nodeAffinity") or {}),
            "preferredDuringSchedulingIgnoredDuringExecution": PREFERRED,
        }
        pod.affinity = {**pod.affinity, "nodeAffinity": node_affinity}
    infos = list(snapshot.nodes.values())  # some without a node object
    if seed % 3 == 0:  # the generator gives nodes no images: put the pod's on some of them
        pod.images = [*pod.images, "registry/app:1", *(["registry/side:2"] if seed % 2 else [])]
        for i, info in enumerate(infos):
            if info.node is not None and i % 2:
                images = {"registry/app:1": (i + 1) * 40 * 2**20}
                if i % 3:
                    images["registry/side:2"] = 300 * 2**20
                info.node = dataclasses.replace(info.node, images=images)
    ctx = ScoringContext(resource_weights=WEIGHTS[seed % 3], summary=snapshot.summary())
    outcome: dict[str, bool] = {}
    for name, priority in SCORERS.items():
        state = priority.prepare(pod, snapshot, infos, ctx)
        per_node = [priority.score(pod, info, state, ctx) for info in infos]
        score_all = getattr(priority, "score_all", None)
        if score_all is not None:
            assert score_all(pod, infos, state, ctx) == per_node, name
        normalize_values = getattr(priority, "normalize_values", None)
        if normalize_values is not None:
            by_name = priority.normalize({info.name: s for info, s in zip(infos, per_node, strict=True)}, state)
            assert normalize_values(per_node, state) == [by_name[info.name] for info in infos], name
        if name == "PodTopologySpread" and state is not None and state.ignored:
            outcome["PodTopologySpread ignores candidates"] = True
        constant = getattr(priority, "constant", None)
        fixed = constant(pod, snapshot, infos, state, ctx) if constant is not None else None
        outcome[name] = fixed is not None
        if fixed is not None:
            normalized = priority.normalize({info.name: s for info, s in zip(infos, per_node, strict=True)}, state)
            assert set(per_node) <= {fixed[0]}, name
            assert set(normalized.values()) <= {fixed[1]}, name
    return outcome


@pytest.mark.parametrize("seed", range(40))
def test_score_all_and_constant_agree_with_score(seed: int) -> None:
    _check(seed)


def test_the_random_pods_exercise_both_outcomes_of_constant() -> None:
    hits: Counter[tuple[str, bool]] = Counter()
    for seed in range(40):
        hits.update(_check(seed).items())
    for name in ("NodeAffinity", "TaintToleration", "ImageLocality", "PodTopologySpread", "InterPodAffinity"):
        assert hits[(name, True)] > 0, name
        assert hits[(name, False)] > 0, name
    # normalize_values is checked with candidates the spread leaves out, too
    assert hits[("PodTopologySpread ignores candidates", True)] > 0
