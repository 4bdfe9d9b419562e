"""The filters that read other nodes decide all candidates in one call (``check_all``): the same
verdicts, in the same order, as ``check`` node by node, on random clusters."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from extenders.plugins import names
from extenders.plugins.framework import SKIP
from extenders.plugins.inter_pod_affinity.filtering import (
    AFFINITY_NOT_MATCH,
    ANTI_AFFINITY_NOT_MATCH,
    EXISTING_ANTI_AFFINITY_NOT_MATCH,
)
from extenders.plugins.pod_topology_spread.filtering import CONSTRAINTS_NOT_MATCH, MISSING_LABEL
from extenders.plugins.registry import FILTERS
from extenders.sync.convert import pod_info
from tests.gen_cluster import build_snapshot, gen_cluster, gen_incoming_pod

CROSS_NODE = [names.INTER_POD_AFFINITY_FILTER, names.POD_TOPOLOGY_SPREAD]
REASONS = {
    names.INTER_POD_AFFINITY_FILTER: {AFFINITY_NOT_MATCH, ANTI_AFFINITY_NOT_MATCH, EXISTING_ANTI_AFFINITY_NOT_MATCH},
    names.POD_TOPOLOGY_SPREAD: {CONSTRAINTS_NOT_MATCH, MISSING_LABEL},
}


@pytest.mark.parametrize("name", CROSS_NODE)
def test_check_all_gives_each_nodes_check_verdict(name: str) -> None:
    plugin = FILTERS[name]
    assert plugin.check_all is not None, f"{name} decides node by node"
    reasons: Counter[str] = Counter()
    decided = 0
    for seed in range(400):
        rng = random.Random(seed)
        cluster = gen_cluster(rng, rng.randint(3, 14))
        snapshot = build_snapshot(cluster)
        pod = pod_info(gen_incoming_pod(rng, cluster))
        state = plugin.prepare(pod, snapshot)
        if state is SKIP:
            continue
        nodes = [info for info in snapshot.nodes.values() if info.node is not None]
        rng.shuffle(nodes)
        expected = [plugin.check(pod, node, state) for node in nodes]
        assert plugin.check_all(pod, nodes, state) == expected, f"seed {seed}"
        decided += 1
        reasons.update(verdict.reason for verdict in expected if not verdict.fit)
    # The comparison means something only if the random clusters refuse nodes for every reason.
    assert decided > 50
    assert set(reasons) == REASONS[name], reasons
