"""The shared end-to-end scenarios (tests/e2e/scenarios.py) against the tier's loopback control plane:
the same code the compose stack's test runner runs against the compose stack."""

from __future__ import annotations

import pytest

from devstack.kube import Kube
from devstack.stack import Stack
from tests.e2e.scenarios import SCENARIOS, Target, prepare, scenario_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def target(kube: Kube, stack: Stack) -> Target:
    prepare(kube)
    return Target(kube, stack.name, [replica.url for replica in stack.replicas], stack.logs)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str, target: Target) -> None:
    with scenario_cluster(target) as cluster:
        SCENARIOS[name](cluster)
