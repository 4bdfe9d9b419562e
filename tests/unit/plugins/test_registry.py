"""Every priority is registered under its policy name and keeps normalised scores in 0..MAX."""

from __future__ import annotations

import random
from typing import Any

import pytest

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ScoringContext
from extenders.plugins.registry import SCORERS
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info

NAMES = {
    "LeastRequested",
    "MostRequested",
    "BalancedResourceAllocation",
    "NodeAffinity",
    "TaintToleration",
    "ImageLocality",
    "SelectorSpread",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodePreferAvoidPods",
}


def test_registry_holds_every_priority_by_name() -> None:
    assert set(SCORERS) == NAMES
    for name, priority in SCORERS.items():
        assert priority.name == name


def _cluster(seed: int) -> tuple[Snapshot, list[NodeInfo], PodInfo]:
    rng = random.Random(seed)
    nodes: list[NodeInfo] = []
    for i in range(12):
        name = f"n{i}"
        pods = [
            pod_info(
                {
                    "metadata": {
                        "name": f"{name}-p{j}",
                        "namespace": "default",
                        "uid": f"{name}-p{j}",
                        "labels": {"app": rng.choice(["web", "db"])},
                        "ownerReferences": [
                            {"kind": "ReplicaSet", "name": "rs", "uid": rng.choice(["a", "b"]), "controller": True}
                        ],
                    },
                    "spec": {
                        "nodeName": name,
                        "containers": [
                            {
                                "name": "c",
                                "image": "nginx",
                                "resources": {
                                    "requests": {"cpu": f"{rng.randint(0, 3000)}m", "memory": f"{rng.randint(0, 6)}Gi"}
                                },
                            }
                        ],
                        "affinity": {
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": 9,
                                        "podAffinityTerm": {
                                            "labelSelector": {"matchLabels": {"app": "web"}},
                                            "topologyKey": "kubernetes.io/hostname",
                                        },
                                    }
                                ]
                            }
                        }
                        if rng.random() < 0.3
                        else {},
                    },
                }
            )
            for j in range(rng.randint(0, 4))
        ]
        facts = node_facts(
            {
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "topology.kubernetes.io/zone": f"z{i % 3}",
                        "disk": rng.choice(["ssd", "hdd"]),
                    },
                },
                "spec": {"taints": [{"key": "t", "effect": "PreferNoSchedule"}] if rng.random() < 0.3 else []},
                "status": {
                    "allocatable": {"cpu": "4", "memory": "8Gi"},
                    "images": [{"names": ["nginx:latest"], "sizeBytes": 150 * 2**20}] if i % 2 else [],
                },
            }
        )
        nodes.append(NodeInfo.build(name, facts, pods))
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 3,
                        "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                    }
                ]
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ],
    }
    incoming = pod_info(
        {
            "metadata": {
                "name": "in",
                "namespace": "default",
                "uid": "in",
                "labels": {"app": "web"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "a", "controller": True}],
            },
            "spec": spec,
        }
    )
    return Snapshot(nodes={n.name: n for n in nodes}), nodes, incoming


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(NAMES))
def test_normalised_scores_cover_the_candidates_within_range(name: str, seed: int) -> None:
    snapshot, nodes, incoming = _cluster(seed)
    candidates = nodes[: 8 + seed]
    ctx = ScoringContext(resource_weights={"cpu": 1, "memory": 1}, hard_pod_affinity_symmetric_weight=1)
    priority = SCORERS[name]
    state = priority.prepare(incoming, snapshot, candidates, ctx)
    raw = {n.name: priority.score(incoming, n, state, ctx) for n in candidates}
    normalized = priority.normalize(raw, state)
    assert set(normalized) == {n.name for n in candidates}
    for score in normalized.values():
        assert 0.0 <= score <= MAX_PRIORITY + 1e-9
