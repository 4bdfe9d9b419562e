"""A real kube-apiserver slower than a Binding's request timeout.

The test makes kube-scheduler's bind call itself, for a pod no scheduler picks up, and stops the API
server's process (SIGSTOP) before it: our replica's Binding then waits in the stopped server's socket,
as behind an overloaded server. The bind must answer an error that says the outcome is unknown and
keep its reservation. Once the server runs again, it decides: it creates the Binding late, or drops
the request whose client hung up. Our snapshot must come to agree either way.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from devstack.controlplane import ControlPlane
from devstack.kube import wait_for
from devstack.stack import Stack
from tests.e2e.conftest import Cluster, StartStack

pytestmark = pytest.mark.e2e

KUBE_TIMEOUT = 2.0
ASSUMED_TTL = 20.0
NOBODY = "no-such-scheduler"  # kube-scheduler leaves the test's pods alone: the test binds them


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(
        env={"EXTENDER_KUBE_TIMEOUT_SECONDS": str(KUBE_TIMEOUT), "EXTENDER_ASSUMED_TTL_SECONDS": str(ASSUMED_TTL)}
    )


def bind(cluster: Cluster, pod: dict[str, Any], node: str, timeout: float = 30) -> str:
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    with cluster.stack.replicas[0].client(timeout) as http:
        resp = http.post("/bind", json=body)
    assert resp.status_code == 200, resp.text
    error: str = resp.json()["Error"]
    return error


def on_node(cluster: Cluster, node: str, name: str) -> dict[str, Any] | None:
    """The pod's entry on ``node`` in the first replica's snapshot (None: not there)."""
    doc = cluster.stack.replicas[0].get(f"/v1/nodes/{node}").json()
    return next((p for p in doc["pods"] if p["namespace"] == cluster.namespace and p["name"] == name), None)


def test_a_binding_the_api_server_answers_too_late_is_reconciled_whatever_it_decided(
    cluster: Cluster, control_plane: ControlPlane
) -> None:
    node = cluster.node("slow", cpu="4")
    cluster.wait_synced()
    late = cluster.kube.create_pod(
        cluster.namespace, cluster.kube.pod_body("late", scheduler=NOBODY, requests={"cpu": "1"})
    )
    fence = cluster.kube.create_pod(
        cluster.namespace, cluster.kube.pod_body("fence", scheduler=NOBODY, requests={"cpu": "100m"})
    )
    # The pod watch is ordered: once our snapshot has the fence bound, it has ``late`` pending, and the
    # bind below resolves it there (with the API server stopped, a look-up there would hang as well).
    assert bind(cluster, fence, node) == ""
    wait_for(
        lambda: (on_node(cluster, node, "fence") or {}).get("assumed") is False, 30, "the fence bound in our snapshot"
    )

    apiserver = next(p for p in control_plane.processes if p.name == "kube-apiserver")
    apiserver.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        error = bind(cluster, late, node)
        answered = time.monotonic() - started
        entry = on_node(cluster, node, "late")
    finally:
        apiserver.proc.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    assert "got no answer from the API server" in error and "the reservation is kept" in error, error
    assert KUBE_TIMEOUT * 0.9 < answered < KUBE_TIMEOUT + 10, answered
    assert entry is not None and entry["assumed"] is True, f"the reservation must stand meanwhile: {entry}"

    # The server decides now. Either way the API and our snapshot end up agreeing, without help.
    def settled() -> str | None:
        api = cluster.kube.get(f"/api/v1/namespaces/{cluster.namespace}/pods/late") or {}
        bound_to = (api.get("spec") or {}).get("nodeName")
        ours = on_node(cluster, node, "late")
        if bound_to == node and ours is not None and ours["assumed"] is False:
            return "created late"
        if not bound_to and ours is None and time.monotonic() - resumed > 1:
            return "dropped"
        return None

    outcome = wait_for(settled, ASSUMED_TTL + 30, "the API server's decision reflected in our snapshot")
    agreed = time.monotonic() - resumed
    if outcome == "dropped":  # the reservation went with its TTL; kube-scheduler would bind again
        assert bind(cluster, late, node) == ""
        wait_for(lambda: (on_node(cluster, node, "late") or {}).get("assumed") is False, 30, "late bound")
    for replica in cluster.stack.replicas:
        assert replica.readiness()["ready"] is True
    assert "Traceback" not in cluster.stack.logs(whole=True)
    print(
        f"slow API server: the bind answered after {answered:.1f}s; the Binding was {outcome}; "
        f"our snapshot agreed {agreed:.1f}s after the server resumed"
    )
