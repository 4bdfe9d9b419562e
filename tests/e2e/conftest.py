"""Fixtures of the end-to-end tier: one real control plane per session, our replicas behind a
balancer registered as extenders of a real kube-scheduler, a namespace and fresh nodes per test.

Every test runs once per Kubernetes release it is meant for (``kube_release``, a session
parameter, so one control plane runs at a time): the whole tier on the newest tested release, the
tests marked ``every_release`` on each (devstack/releases.py); a test marked ``since("1.30")`` on
none older. ``KUBE_VERSIONS`` names other releases ("1.28.7" or "1.37.2,1.34.4"), each then running
the whole tier; ``--kube-release V`` keeps one release's share (the whole suite runs each release in
a process of its own). A release's binaries come from ``KUBE_BIN_DIR`` when they are that version,
else the build cache, else they are built (minutes, once). Without them the release's tests are left
out with one line naming what is missing (tests/plugins/e2e_tier.py), unless
``EXTENDER_E2E=required`` (as in CI): then they fail.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack import releases
from devstack.controlplane import ControlPlane, find_binaries
from devstack.kube import Kube, install_podgroup_crd, priority_class, wait_for
from devstack.releases import Release
from devstack.stack import Stack
from tests.e2e.scenarios import ScenarioCluster, Target
from tests.plugins.e2e_tier import missing_message, selected, since_order

# Gang timing for the tier: the defaults, with a leader lease short enough for the kill test.
GANG_ENV = {"EXTENDER_GANG_ARRIVAL_LEASE_SECONDS": "3"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kube_release" not in metafunc.fixturenames:
        return
    everywhere = metafunc.definition.get_closest_marker("every_release") is not None
    chosen = [r for r in selected(metafunc.config) if everywhere or r.whole_tier]
    since = metafunc.definition.get_closest_marker("since")
    if since is not None:  # needs an API older releases do not serve
        oldest = since_order(since.args)
        chosen = [r for r in chosen if r.order[:2] >= oldest]
    metafunc.parametrize("kube_release", chosen, ids=[r.version for r in chosen], indirect=True, scope="session")


@pytest.fixture(scope="session")
def kube_release(request: pytest.FixtureRequest) -> Release:
    """The release this test runs against (a parameter: see the module's docstring)."""
    release: Release = request.param
    return release


@pytest.fixture(scope="session")
def control_plane(kube_release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    message = missing_message(kube_release)
    if message is not None:
        pytest.fail(f"end-to-end tier: {message}", pytrace=False)
    try:
        binaries, _ = find_binaries(kube_release)
    except releases.ReleaseUnavailable as exc:
        pytest.fail(f"end-to-end tier on v{kube_release.version}: {exc}", pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp(f"control-plane-{kube_release.version}"), binaries)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = control_plane.client()
    kube = Kube(client)
    kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class("e2e-low", 100))
    kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class("e2e-high", 1000))
    install_podgroup_crd(kube)
    yield kube
    client.close()


StartStack = Callable[..., Stack]


@pytest.fixture(scope="module")
def stack_factory(
    control_plane: ControlPlane, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StartStack]:
    stacks: list[Stack] = []

    def _start(**kwargs: Any) -> Stack:
        env = {**GANG_ENV, **kwargs.pop("env", {})}
        stack = Stack(control_plane, redis_url, tmp_path_factory.mktemp("stack"), env=env, **kwargs)
        stacks.append(stack)
        return stack

    yield _start
    for stack in stacks:
        stack.stop()


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    """The module's default stack: two replicas, the README's two extender entries."""
    return stack_factory()


class Cluster(ScenarioCluster):
    """One test's view: its namespace, the nodes it made, and helpers that fail with the logs; the
    shared scenarios' cluster, on the module's stack."""

    def __init__(self, kube: Kube, stack: Stack, namespace: str) -> None:
        super().__init__(Target(kube, stack.name, [r.url for r in stack.replicas], stack.logs), namespace)
        self.stack = stack

    def placement(self, label_selector: str | None = None) -> dict[str, str]:
        return self.kube.placement(self.namespace, label_selector)

    def wait_synced(self, timeout: float = 30) -> None:
        """Every replica's snapshot has this test's nodes (through each replica's own client, which
        presents the client certificate when the stack serves mutual TLS)."""

        def check() -> bool:
            for replica in self.stack.replicas:
                for name in self.node_names:
                    if replica.get(f"/v1/nodes/{name}", timeout=2).status_code != 200:
                        return False
            return True

        wait_for(check, timeout, "the replicas' snapshots have the nodes")


@pytest.fixture
def cluster(kube: Kube, stack: Stack) -> Iterator[Cluster]:
    namespace = f"e2e-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    c = Cluster(kube, stack, namespace)
    yield c
    c.cleanup()
