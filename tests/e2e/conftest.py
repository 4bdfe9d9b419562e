"""Fixtures of the end-to-end tier: one real control plane per session, our replicas behind a
balancer registered as extenders of a real kube-scheduler, a namespace and fresh nodes per test.

Binaries: ``KUBE_BIN_DIR`` (kube-apiserver, kube-scheduler, optionally etcd), else ``PATH``.
Without them the tier is left out with one line naming what is missing (tests/plugins/e2e_tier.py),
unless ``EXTENDER_E2E=required`` (as in CI), where a missing binary fails it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack.controlplane import ControlPlane, find_binaries
from devstack.kube import Kube, install_podgroup_crd, priority_class, wait_for
from devstack.stack import Stack
from tests.plugins.e2e_tier import missing_message

# Gang timing for the tier: the defaults, with a leader lease short enough for the kill test.
GANG_ENV = {"EXTENDER_GANG_ARRIVAL_LEASE_SECONDS": "3"}


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    binaries, _ = find_binaries()
    message = missing_message()
    if message is not None:
        pytest.fail(f"end-to-end tier: {message}", pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), binaries)
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


class Cluster:
    """One test's view: its namespace, the nodes it made, and helpers that fail with the logs."""

    def __init__(self, kube: Kube, stack: Stack, namespace: str) -> None:
        self.kube = kube
        self.stack = stack
        self.namespace = namespace
        self.node_names: list[str] = []

    def node(self, name: str, **kwargs: Any) -> str:
        full = f"{self.namespace}-{name}"
        self.kube.create_node(full, **kwargs)
        self.node_names.append(full)
        return full

    def nodes(self, count: int, prefix: str = "n", **kwargs: Any) -> list[str]:
        return [self.node(f"{prefix}{i}", **kwargs) for i in range(count)]

    def pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return self.kube.create_pod(self.namespace, self.kube.pod_body(name, scheduler=self.stack.name, **kwargs))

    def placement(self, label_selector: str | None = None) -> dict[str, str]:
        return self.kube.placement(self.namespace, label_selector)

    def wait_bound(self, names: list[str], timeout: float = 60) -> dict[str, str]:
        """Every pod in ``names`` bound; fails with the stack's logs."""

        def check() -> dict[str, str] | None:
            placed = self.placement()
            return placed if all(placed.get(n) for n in names) else None

        try:
            return wait_for(check, timeout, f"pods {names} bound")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\nplacement: {self.placement()}\n{self.stack.logs()}") from None

    def wait_synced(self, timeout: float = 30) -> None:
        """Every replica's snapshot has this test's nodes (the watch has written them)."""

        def check() -> bool:
            for replica in self.stack.replicas:
                for name in self.node_names:
                    if replica.get(f"/v1/nodes/{name}", timeout=2).status_code != 200:
                        return False
            return True

        wait_for(check, timeout, "the replicas' snapshots have the nodes")

    def cleanup(self) -> None:
        self.kube.delete_namespace_pods(self.namespace)
        for name in self.node_names:
            self.kube.delete_node(name)


@pytest.fixture
def cluster(kube: Kube, stack: Stack) -> Iterator[Cluster]:
    namespace = f"e2e-{secrets.token_hex(3)}"
    kube.create_namespace(namespace)
    c = Cluster(kube, stack, namespace)
    yield c
    c.cleanup()
