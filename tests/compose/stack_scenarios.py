"""The compose stack's test runner: the shared end-to-end scenarios (tests/e2e/scenarios.py) against
the stack's API server, whose kube-scheduler calls the replicas through the balancer, and a check that
the balancer spreads those calls over both replicas.

The ``tests`` service of docker-compose.yml runs ``pytest tests/compose/stack_scenarios.py``; the file
name keeps it out of the default run, where no compose stack exists. Its settings come from the
service's environment: KUBECONFIG (an admin identity), COMPOSE_SCHEDULER_NAME and COMPOSE_REPLICAS
(the replicas' URLs, comma separated).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.compose import kube_client
from devstack.kube import Kube, resources
from tests.e2e.scenarios import SCENARIOS, Target, prepare, scenario_cluster


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with kube_client(Path(os.environ["KUBECONFIG"])) as client:
        kube = Kube(client)
        prepare(kube)
        urls = [url.strip() for url in os.environ["COMPOSE_REPLICAS"].split(",") if url.strip()]
        yield Target(kube, os.environ["COMPOSE_SCHEDULER_NAME"], urls)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str, target: Target) -> None:
    with scenario_cluster(target) as cluster:
        SCENARIOS[name](cluster)


def test_the_balancer_spreads_calls_over_every_replica(target: Target) -> None:
    assert len(target.replica_urls) >= 2
    with scenario_cluster(target) as cluster:
        cluster.nodes(2, cpu="4")
        cluster.wait_synced()
        before = {verb: cluster.requests(verb) for verb in ("filter", "bind")}
        names = [f"spread-{i}" for i in range(6)]
        for name in names:
            cluster.pod(name, requests=resources(cpu="500m"))
        cluster.wait_bound(names)
        for verb, counts in before.items():
            after = cluster.requests(verb)
            assert all(after[url] > counts[url] for url in target.replica_urls), f"{verb}: {counts} -> {after}"
