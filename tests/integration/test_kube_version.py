"""A replica follows the kube-scheduler release of the cluster it serves, read from the API server's
``/version`` (the fake answers v1.31.0-fake), unless EXTENDER_KUBE_VERSION names one."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess, StartServer

pytestmark = pytest.mark.integration

TAINTED = {
    "metadata": {"name": "kv-tainted", "labels": {"kubernetes.io/hostname": "kv-tainted"}},
    "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
POD = {
    "metadata": {"name": "kv-pod", "namespace": "default", "uid": "uid-kv-pod"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Pending"},
}


def _following(replica: ServerProcess, version: str, timeout: float = 20.0) -> dict[str, Any]:
    """The replica's readiness details once they show ``version`` (the release is read beside the
    initial list, so readiness may come first); fails with the last details and the log."""
    deadline = time.monotonic() + timeout
    while True:
        details: dict[str, Any] = replica.get("/readyz").json()
        if details.get("kube_version") == version or time.monotonic() > deadline:
            assert details.get("kube_version") == version, f"{details}\n{replica.log()}"
            return details
        time.sleep(0.1)


def _taint_reason(replica: ServerProcess) -> str:
    with replica.client() as http:
        body = http.post("/filter", json={"Pod": POD, "Nodes": {"items": [TAINTED]}}).json()
    reason: str = body["FailedAndUnresolvableNodes"]["kv-tainted"]
    return reason


def test_a_replica_follows_the_clusters_release_unless_a_setting_names_one(
    fake_kube: FakeKube, start_server: StartServer
) -> None:
    base = {
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LOG_LEVEL": "warning",
    }
    follower = start_server(env=base, name="follower", ready=True)
    told = start_server(env={**base, "EXTENDER_KUBE_VERSION": "1.28"}, name="told", ready=True)

    details = _following(follower, "1.31.0")
    assert details["kube_version_source"] == "cluster"
    details = _following(told, "1.28")
    assert details["kube_version_source"] == "setting"

    # The verbs follow it too: both releases predate 1.34.2, so the reason names the taint (the
    # newest release, followed before /version is read, would not).
    assert _taint_reason(follower) == _taint_reason(told) == "node(s) had untolerated taint {k: v}"
