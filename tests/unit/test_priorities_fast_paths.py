"""The engine's fast paths (``constant``, ``score_all``, summary columns) agree with the per-node scorers."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from extenders import engine
from extenders.convert import pod_info
from extenders.model import NodeFacts, NodeInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.node_resources.terms import resource_rows, resource_terms
from extenders.plugins.registry import SCORERS
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from tests.gen_cluster import build_snapshot, gen_cluster, gen_incoming_pod, make_node, make_pod

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
        pod.images = [*pod.images, "registry/app:1"]
        for i, info in enumerate(infos):
            if info.node is not None and i % 2:
                info.node = dataclasses.replace(info.node, images={"registry/app:1": (i + 1) * 40 * 2**20})
    ctx = ScoringContext(resource_weights=WEIGHTS[seed % 3], summary=snapshot.summary())
    outcome: dict[str, bool] = {}
    for name, priority in SCORERS.items():
        state = priority.prepare(pod, snapshot, infos, ctx)
        per_node = [priority.score(pod, info, state, ctx) for info in infos]
        score_all = getattr(priority, "score_all", None)
        if score_all is not None:
            assert score_all(pod, infos, state, ctx) == per_node, name
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


def _zone(info: NodeInfo) -> str | None:
    return info.node.labels.get("zone") if info.node is not None else None


def test_columns_are_patched_for_changed_nodes_only() -> None:
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 2}"}) for i in range(6)]
    first = Snapshot(nodes={n.name: n for n in nodes})
    before = first.summary().column("zone", _zone)
    assert before == {f"n{i}": f"z{i % 2}" for i in range(6)}

    changed = dict(first.nodes)
    changed["n1"] = NodeInfo.build("n1", NodeFacts(name="n1", labels={"zone": "z9"}), [])
    changed["n2"] = NodeInfo.build("n2", NodeFacts(name="n2", labels={}), [])
    changed["n3"] = NodeInfo.build("n3", None, [])
    after = Snapshot(nodes=changed, summary_seed=first.seed()).summary().column("zone", _zone)

    assert after == {"n0": "z0", "n1": "z9", "n4": "z0", "n5": "z1"}
    assert before == {f"n{i}": f"z{i % 2}" for i in range(6)}  # the old table's column is untouched


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
