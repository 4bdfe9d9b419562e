"""A gang taken whole although kube-scheduler failed to evict the member the extender chose.

kube-scheduler's evictions can fail: from 1.33 it evicts a node's victims together, and one that
fails (a victim already gone, say) cancels the rest. Here an admission policy refuses kube-scheduler
the deletion of one member, so the failure is certain. The next preemptor counts that member as
leaving (the extender marked it so) and takes the gang's other member, so nothing would take the
one left but the extender's record of the first answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devstack.kube import KubeError, resources, wait_for
from tests.e2e.conftest import Cluster
from tests.e2e.test_gang_priority import HIGH, LOW, SETTLE_SECONDS, existing, never_partial
from tests.e2e.test_gangs import legacy

# ValidatingAdmissionPolicy is served as admissionregistration.k8s.io/v1 from 1.30; every release from
# there, as kube-scheduler's eviction changed with 1.33 (asynchronous).
pytestmark = [pytest.mark.e2e, pytest.mark.every_release, pytest.mark.since("1.30")]

POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
KEEP = "e2e-scheduler-cannot-delete"
# The identity kube-scheduler runs as in the tier (the control plane's admin token); the extender has its own.
SCHEDULER_USER = "e2e-admin"


@contextmanager
def scheduler_cannot_delete(cluster: Cluster) -> Iterator[None]:
    """While open, kube-scheduler's user cannot delete this namespace's pods labelled ``KEEP``."""
    name = f"{cluster.namespace}-keep"
    cluster.kube.create(
        POLICIES,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}
                    ]
                },
                "matchConditions": [
                    {
                        "name": "the-scheduler-in-this-namespace",
                        "expression": f"request.userInfo.username == '{SCHEDULER_USER}' "
                        f"&& request.namespace == '{cluster.namespace}'",
                    }
                ],
                "validations": [
                    {
                        "expression": f"!has(oldObject.metadata.labels) || !('{KEEP}' in oldObject.metadata.labels)",
                        "message": "the test keeps this pod from kube-scheduler",
                    }
                ],
            },
        },
    )
    cluster.kube.create(
        BINDINGS,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    )
    try:
        in_force(cluster)
        yield
    finally:  # the policy leaves force a moment after its deletion: the namespace's teardown must not wait
        for pod in cluster.kube.pods(cluster.namespace, label_selector=KEEP):
            keep(cluster, pod["metadata"]["name"], None)
        cluster.kube.delete(f"{BINDINGS}/{name}")
        cluster.kube.delete(f"{POLICIES}/{name}")


def in_force(cluster: Cluster) -> None:
    """The policy refuses a probe's deletion (the API server loads a policy a moment after it is made)."""
    probe = cluster.kube.pod_body("keep-probe", scheduler="nobody", labels={KEEP: "true"})
    cluster.kube.create_pod(cluster.namespace, probe)

    def refused() -> bool:
        try:
            cluster.kube.delete_pod(cluster.namespace, "keep-probe")
        except KubeError:
            return True
        cluster.kube.create_pod(cluster.namespace, probe)
        return False

    wait_for(refused, 30, "the admission policy refusing kube-scheduler's deletions")
    keep(cluster, "keep-probe", None)
    cluster.kube.delete_pod(cluster.namespace, "keep-probe")


def keep(cluster: Cluster, pod: str, value: str | None = "true") -> None:
    """Label the pod so kube-scheduler cannot delete it (``None``: take the label off)."""
    cluster.kube.patch(f"/api/v1/namespaces/{cluster.namespace}/pods/{pod}", {"metadata": {"labels": {KEEP: value}}})


def eviction_failed(cluster: Cluster, name: str) -> bool:
    """kube-scheduler logged its failure to delete the pod (the premise of the test)."""
    pod = f'pod="{cluster.namespace}/{name}"'
    return any("Tried to preempted pod" in line and pod in line for line in cluster.stack.logs(whole=True).splitlines())


def test_a_gang_whose_victim_kube_scheduler_failed_to_evict_still_goes_whole(cluster: Cluster) -> None:
    # Gang v (two members, minimum two, low priority) has one member on each node. Pod q0 (high
    # priority) fits only the first node: its preemption takes v-0 there, and the extender records v-1
    # to follow. kube-scheduler cannot delete v-0. Pod q1 fits only the second node: its preemption,
    # counting v-0 as leaving, takes v-1 and records nothing. Only the first record can take v-0.
    first = cluster.node("a", cpu="4", labels={"side": "a"})
    second = cluster.node("b", cpu="4", labels={"side": "b"})
    cluster.wait_synced()
    for i, side in enumerate("ab"):
        cluster.pod(
            f"v-{i}",
            requests=resources(cpu="3"),
            labels=legacy("v", 2),
            priorityClassName=LOW,
            nodeSelector={"side": side},
        )
    cluster.wait_bound(["v-0", "v-1"], timeout=60)
    with scheduler_cannot_delete(cluster):
        keep(cluster, "v-0")
        with never_partial(cluster, {"v": 2}):
            cluster.pod("q0", requests=resources(cpu="3"), priorityClassName=HIGH, nodeSelector={"side": "a"})
            wait_for(lambda: eviction_failed(cluster, "v-0"), 60, f"kube-scheduler failing to evict v-0 on {first}")
            cluster.pod("q1", requests=resources(cpu="3"), priorityClassName=HIGH, nodeSelector={"side": "b"})
            placed = cluster.wait_bound(["q0", "q1"], timeout=90)
            time.sleep(SETTLE_SECONDS + 1)
        assert (placed["q0"], placed["q1"]) == (first, second)
        assert existing(cluster, "v") == [], cluster.placement()

    messages = wait_for(
        lambda: cluster.extender_messages("Pod", "v-0", "Preempted"), 30, "the extender's Preempted Event on v-0"
    )
    # The record of q0's answer took it (had q1's preemption recorded one, it would name q1).
    assert any(f"pod {cluster.namespace}/q0" in m for m in messages), messages
