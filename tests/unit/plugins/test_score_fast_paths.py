"""Every scorer's fast paths (score_all, constant) agree with its plain score on random clusters, under
the newest kube-scheduler release and older ones whose plug-ins score otherwise (extenders.features)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from extenders.features import NEWEST, Features
from extenders.plugins.framework import ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.sync.convert import pod_info
from tests.gen_cluster import build_snapshot, gen_cluster, gen_incoming_pod

# The newest release; one whose BalancedAllocation scores the balance with the pod (1.33 to 1.35); one
# that also scores best-effort pods and leaves init containers' images out of ImageLocality (before 1.30).
RELEASES = (NEWEST, Features(34), Features(28, 7))
WEIGHTS = ({"cpu": 1, "memory": 1}, {"cpu": 2, "memory": 1, "ephemeral-storage": 1}, {"memory": 3})


PREFERRED = [{"weight": 4, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]


def _check(seed: int, features: Features = NEWEST) -> dict[str, bool]:
    """Asserts the fast paths on one random cluster, the plug-ins following ``features``; returns, per
    priority, whether it was constant."""
    rng = random.Random(seed)
    cluster = gen_cluster(rng)
    snapshot = dataclasses.replace(build_snapshot(cluster), features=features)
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


@pytest.mark.parametrize("features", RELEASES, ids=lambda f: f.name)
@pytest.mark.parametrize("seed", range(40))
def test_score_all_and_constant_agree_with_score(seed: int, features: Features) -> None:
    _check(seed, features)


@pytest.mark.parametrize("features", RELEASES, ids=lambda f: f.name)
def test_balanced_allocation_fast_path_scores_best_effort_pods_as_score_does(features: Features) -> None:
    """A pod that requests nothing: 0 everywhere from 1.33, the nodes' balance before; score_all
    (from the summary's rows, two resources inlined) agrees either way."""
    balanced = SCORERS["BalancedResourceAllocation"]
    score_all = balanced.score_all
    assert score_all is not None
    scored = 0
    for seed in range(40):
        rng = random.Random(seed)
        cluster = gen_cluster(rng)
        snapshot = dataclasses.replace(build_snapshot(cluster), features=features)
        incoming = pod_info(gen_incoming_pod(rng, cluster))
        best_effort = dataclasses.replace(incoming, requests={}, best_effort=True)
        infos = list(snapshot.nodes.values())
        ctx = ScoringContext(resource_weights=WEIGHTS[seed % 3], summary=snapshot.summary())
        state = balanced.prepare(best_effort, snapshot, infos, ctx)
        per_node = [balanced.score(best_effort, info, state, ctx) for info in infos]
        assert score_all(best_effort, infos, state, ctx) == per_node, seed
        if features.balanced_allocation_skips_best_effort:
            assert state is None and set(per_node) == {0.0}, seed
        scored += any(per_node)
    assert scored > 20 if not features.balanced_allocation_skips_best_effort else scored == 0


def test_the_random_pods_exercise_both_outcomes_of_constant() -> None:
    hits: Counter[tuple[str, bool]] = Counter()
    for seed in range(40):
        hits.update(_check(seed).items())
    for name in ("NodeAffinity", "TaintToleration", "ImageLocality", "PodTopologySpread", "InterPodAffinity"):
        assert hits[(name, True)] > 0, name
        assert hits[(name, False)] > 0, name
    # normalize_values is checked with candidates the spread leaves out, too
    assert hits[("PodTopologySpread ignores candidates", True)] > 0
