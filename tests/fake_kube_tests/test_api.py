"""Tests of the fake kube-apiserver itself: process and auth, wire formats, CRUD and status rules, binding,
served groups, the CRD switch, faults and latency."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lightkube.config.kubeconfig import KubeConfig

from tests.fake_kube.builders import (
    make_namespace,
    make_node,
    make_pdb,
    make_pod,
    make_podgroup,
    make_pvc,
    make_service,
    make_workload,
)
from tests.fake_kube.client import KubeApiError
from tests.fake_kube_tests.support import next_event, rv
from tests.plugins.fake_kube import FakeKube, StartFakeKube

pytestmark = pytest.mark.integration


# -- plumbing: process, auth, kubeconfig -------------------------------------------------------------


def test_token_auth_and_kubeconfig(fake_kube: FakeKube) -> None:
    anonymous = fake_kube.client.request("GET", "/api/v1/nodes", headers={"Authorization": "Bearer wrong"})
    assert anonymous.status_code == 401
    assert anonymous.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    config = KubeConfig.from_file(str(fake_kube.kubeconfig_path))
    cluster = config.get()
    assert cluster is not None and cluster.user is not None
    assert cluster.cluster.server == fake_kube.url
    assert cluster.user.token == fake_kube.token
    listed = fake_kube.client.list("Node")
    assert listed["kind"] == "NodeList" and listed["items"] == []


# -- CRUD and status semantics ------------------------------------------------------------------------


def test_create_get_list_with_wire_formats(kube: FakeKube) -> None:
    c = kube.client
    node = c.create(make_node("crud-n1", cpu="8", labels={"zone": "a"}))
    assert node["metadata"]["uid"] and node["metadata"]["creationTimestamp"].endswith("Z")
    assert node["status"]["allocatable"]["cpu"] == "8"  # nodes keep the status they are created with
    pod = c.create(make_pod("p1", namespace="crud", node_name="crud-n1", labels={"app": "a"}))
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "crud-n1"
    assert pod["spec"]["schedulerName"] == "default-scheduler" and pod["spec"]["priority"] == 0
    c.create(make_pod("p2", namespace="crud", labels={"app": "b"}))
    c.create(make_pod("p3", namespace="crud-other", labels={"app": "a"}))

    listed = c.list("Pod", "crud")
    assert listed["kind"] == "PodList" and listed["apiVersion"] == "v1"
    assert int(listed["metadata"]["resourceVersion"]) >= rv(pod)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["p1", "p2"]
    assert "kind" not in listed["items"][0]  # typed list items carry no TypeMeta
    everywhere = c.list("Pod", labelSelector="app=a")
    assert {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere["items"]} >= {
        ("crud", "p1"),
        ("crud-other", "p3"),
    }
    unbound = c.list("Pod", "crud", fieldSelector="spec.nodeName=")
    assert [p["metadata"]["name"] for p in unbound["items"]] == ["p2"]
    on_node = c.list("Pod", fieldSelector="spec.nodeName=crud-n1,status.phase!=Succeeded")
    assert [p["metadata"]["name"] for p in on_node["items"]] == ["p1"]
    assert c.get("Pod", "p2", "crud")["kind"] == "Pod"

    bad_field = c.request("GET", "/api/v1/pods", params={"fieldSelector": "spec.foo=x"})
    assert bad_field.status_code == 400 and bad_field.json()["message"] == "field label not supported: spec.foo"
    with pytest.raises(KubeApiError) as exc:
        c.create(make_pod("p1", namespace="crud"))
    assert exc.value.status_code == 409 and exc.value.reason == "AlreadyExists"
    assert exc.value.body["message"] == 'pods "p1" already exists'
    with pytest.raises(KubeApiError) as exc:
        c.get("Pod", "nope", "crud")
    assert exc.value.status_code == 404 and exc.value.body["message"] == 'pods "nope" not found'
    assert exc.value.body["kind"] == "Status" and exc.value.body["details"] == {"name": "nope", "kind": "pods"}


def test_update_conflicts_patch_and_status_subresource(kube: FakeKube) -> None:
    c = kube.client
    node = c.create(make_node("upd-n1"))
    stale = dict(node)
    updated = c.replace({**node, "metadata": {**node["metadata"], "labels": {"x": "1"}}})
    assert rv(updated) > rv(node) and updated["metadata"]["uid"] == node["metadata"]["uid"]
    with pytest.raises(KubeApiError) as exc:
        c.replace({**stale, "metadata": {**stale["metadata"], "labels": {"x": "2"}}})
    assert exc.value.status_code == 409 and exc.value.reason == "Conflict"
    assert "the object has been modified" in exc.value.body["message"]

    # the main resource ignores .status; /status changes only .status
    patched = c.patch(
        "Node", "upd-n1", {"spec": {"unschedulable": True}, "status": {"allocatable": {"cpu": "1"}}}, namespace=None
    )
    assert patched["spec"]["unschedulable"] is True and patched["status"]["allocatable"]["cpu"] == "4"
    both = {"status": {"allocatable": {"cpu": "1"}}, "spec": {"unschedulable": None}}
    status_patched = c.patch("Node", "upd-n1", both, namespace=None, status=True)
    assert status_patched["status"]["allocatable"]["cpu"] == "1" and status_patched["spec"]["unschedulable"] is True
    noop = c.patch("Node", "upd-n1", {"metadata": {"labels": {"x": "1"}}}, namespace=None)
    assert rv(noop) == rv(status_patched)  # a no-op write makes no new revision
    smp = c.patch(
        "Node",
        "upd-n1",
        {"metadata": {"labels": {"y": "2"}}},
        namespace=None,
        content_type="application/strategic-merge-patch+json",
    )
    assert smp["metadata"]["labels"] == {"x": "1", "y": "2"}
    json_patch = c.request(
        "PATCH", "/api/v1/nodes/upd-n1", content=b"[]", headers={"Content-Type": "application/json-patch+json"}
    )
    assert json_patch.status_code == 415

    # pods: nodeName is only set through the binding; custom resources need a resourceVersion on PUT
    pod = c.create(make_pod("p", namespace="upd"))
    with pytest.raises(KubeApiError) as exc:
        c.patch("Pod", "p", {"spec": {"nodeName": "upd-n1"}}, namespace="upd")
    assert exc.value.status_code == 422 and exc.value.reason == "Invalid"
    relabelled = c.patch("Pod", "p", {"metadata": {"labels": {"k": "v"}}}, namespace="upd")
    assert relabelled["metadata"]["labels"] == {"k": "v"} and rv(relabelled) > rv(pod)
    group = c.create(make_podgroup("g", namespace="upd", min_member=3))
    assert group["metadata"]["generation"] == 1 and "kind" in c.list("PodGroup", "upd")["items"][0]
    no_rv = {**group, "metadata": {k: v for k, v in group["metadata"].items() if k != "resourceVersion"}}
    with pytest.raises(KubeApiError) as exc:
        c.replace({**no_rv, "spec": {"minMember": 4}})
    assert exc.value.status_code == 422
    bumped = c.replace({**group, "spec": {"minMember": 4}})
    assert bumped["metadata"]["generation"] == 2

    pdb = c.create(make_pdb("budget", namespace="upd", match_labels={"k": "v"}, min_available=1, disruptions_allowed=1))
    assert pdb["status"]["disruptionsAllowed"] == 1 and pdb["apiVersion"] == "policy/v1"
    assert c.list("PodDisruptionBudget")["kind"] == "PodDisruptionBudgetList"

    deleted = c.delete("PodDisruptionBudget", "budget", "upd")
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    with pytest.raises(KubeApiError) as exc:
        c.delete("PodDisruptionBudget", "budget", "upd")
    assert exc.value.status_code == 404
    with pytest.raises(KubeApiError) as exc:
        c.delete("Pod", "p", "upd", uid="not-the-uid")
    assert exc.value.status_code == 409 and "Precondition failed: UID in precondition" in exc.value.body["message"]
    assert c.delete("Pod", "p", "upd")["kind"] == "Pod"  # the pod registry answers with the object


def test_list_pagination_is_consistent(kube: FakeKube) -> None:
    c = kube.client
    for i in range(5):
        c.create(make_pod(f"p{i}", namespace="pages"), with_status=False)
    first = c.list("Pod", "pages", limit=2)
    assert len(first["items"]) == 2 and first["metadata"]["remainingItemCount"] == 3
    c.create(make_pod("p9", namespace="pages"), with_status=False)  # not part of the paginated snapshot
    second = c.list("Pod", "pages", limit=2, **{"continue": first["metadata"]["continue"]})
    third = c.list("Pod", "pages", limit=2, **{"continue": second["metadata"]["continue"]})
    names = [p["metadata"]["name"] for page in (first, second, third) for p in page["items"]]
    assert names == ["p0", "p1", "p2", "p3", "p4"] and "continue" not in third["metadata"]
    assert third["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


# -- binding ----------------------------------------------------------------------------------------------


def test_binding_mirrors_kube_apiserver(kube: FakeKube) -> None:
    c = kube.client
    missing = c.bind("ghost", "n1", namespace="b1")
    assert missing.status_code == 404 and missing.json()["message"] == 'pods "ghost" not found'
    pod = c.create(make_pod("p", namespace="b1"))
    uid = pod["metadata"]["uid"]
    wrong_uid = c.bind("p", "n1", namespace="b1", uid="00000000-0000-0000-0000-000000000000")
    assert wrong_uid.status_code == 409 and wrong_uid.json()["reason"] == "Conflict"
    assert (
        f"UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}"
        in (wrong_uid.json()["message"])
    )
    with c.watch("Pod", "b1", resourceVersion=pod["metadata"]["resourceVersion"]) as stream:
        ok = c.bind("p", "node-that-does-not-exist", namespace="b1", uid=uid)
        assert ok.status_code == 201
        assert ok.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        modified = next_event(stream)
    assert modified["type"] == "MODIFIED" and modified["object"]["spec"]["nodeName"] == "node-that-does-not-exist"
    conditions = {cond["type"]: cond["status"] for cond in modified["object"]["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True" and rv(modified["object"]) > rv(pod)
    again = c.bind("p", "node-that-does-not-exist", namespace="b1", uid=uid)  # even the same node
    assert again.status_code == 409
    assert again.json()["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node '
        '"node-that-does-not-exist"'
    )
    name_mismatch = c.request(
        "POST", "/api/v1/namespaces/b1/pods/p/binding", json={"metadata": {"name": "other"}, "target": {"name": "n"}}
    )
    assert name_mismatch.status_code == 400

    terminating = c.delete("Pod", "p", "b1", grace_period=1)
    assert terminating["metadata"]["deletionTimestamp"] and c.get("Pod", "p", "b1")
    deadline = time.monotonic() + 5
    while c.request("GET", "/api/v1/namespaces/b1/pods/p").status_code != 404:
        assert time.monotonic() < deadline, "graceful deletion never finished"
        time.sleep(0.05)


# -- CRD switch, faults, latency --------------------------------------------------------------------------


def test_namespaces_are_labelled_with_their_name_and_claims_listed_across_namespaces(kube: FakeKube) -> None:
    c = kube.client
    created = c.create(make_namespace("ns-labels", {"team": "a"}))
    assert created["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "ns-labels"}
    assert created["status"] == {"phase": "Active"} and "namespace" not in created["metadata"]
    # an update cannot drop or change the name label
    patched = c.patch(
        "Namespace", "ns-labels", {"metadata": {"labels": {"kubernetes.io/metadata.name": "x", "team": None}}}, None
    )
    assert patched["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ns-labels"}
    assert c.get("Namespace", "ns-labels", namespace=None)["metadata"]["labels"] == patched["metadata"]["labels"]
    assert "ns-labels" in {n["metadata"]["name"] for n in c.list("Namespace")["items"]}
    claim = c.create(make_pvc("data", "ns-claims", ["ReadWriteOncePod"]))
    assert claim["status"] == {"phase": "Pending"} and claim["spec"]["accessModes"] == ["ReadWriteOncePod"]
    c.create(make_pvc("data", "ns-claims-2"))
    listed = c.list("PersistentVolumeClaim")
    assert listed["kind"] == "PersistentVolumeClaimList"
    keys = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert {("ns-claims", "data"), ("ns-claims-2", "data")} <= keys
    assert [i["metadata"]["name"] for i in c.list("PersistentVolumeClaim", "ns-claims")["items"]] == ["data"]
    resources = {r["name"] for r in c.request("GET", "/api/v1").json()["resources"]}
    assert {"namespaces", "persistentvolumeclaims"} <= resources


def test_services_and_workloads_are_served_in_their_groups(kube: FakeKube) -> None:
    c = kube.client
    service = c.create(make_service("web", "ns-wl", {"app": "web"}))
    assert service["spec"]["selector"] == {"app": "web"} and "generation" not in service["metadata"]
    rs = c.create(make_workload("ReplicaSet", "web-1", "ns-wl", {"matchLabels": {"app": "web"}}))
    assert rs["metadata"]["generation"] == 1
    scaled = c.patch("ReplicaSet", "web-1", {"spec": {"replicas": 3}}, namespace="ns-wl")
    assert scaled["metadata"]["generation"] == 2
    c.create(make_workload("StatefulSet", "db", "ns-wl"))
    c.create(make_workload("ReplicationController", "old", "ns-wl", {"app": "old"}))
    for kind, name in (
        ("ReplicaSet", "web-1"),
        ("StatefulSet", "db"),
        ("ReplicationController", "old"),
        ("Service", "web"),
    ):
        assert name in {i["metadata"]["name"] for i in c.list(kind)["items"]}  # across namespaces
    assert c.request("GET", "/apis/apps/v1/replicasets").json()["kind"] == "ReplicaSetList"
    apps = {r["name"] for r in c.request("GET", "/apis/apps/v1").json()["resources"]}
    assert {"replicasets", "statefulsets"} <= apps
    groups = {g["name"] for g in c.request("GET", "/apis").json()["groups"]}
    assert "apps" in groups
    core = {r["name"] for r in c.request("GET", "/api/v1").json()["resources"]}
    assert {"services", "replicationcontrollers"} <= core


def test_podgroup_crd_can_be_absent(fake_kube_factory: StartFakeKube) -> None:
    kube = fake_kube_factory(podgroups=False)
    c = kube.client
    listed = c.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups")
    assert listed.status_code == 404
    assert listed.json()["kind"] == "Status" and listed.json()["reason"] == "NotFound"
    assert c.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/d/podgroups/g").status_code == 404
    assert c.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1").status_code == 404
    groups = {g["name"] for g in c.request("GET", "/apis").json()["groups"]}
    assert groups == {"policy", "apps"}
    assert c.list("Pod")["kind"] == "PodList"  # the rest still works
    c.set_podgroups(True)  # the CRD gets installed
    assert c.create(make_podgroup("g", namespace="d"))["kind"] == "PodGroup"


def test_faults_and_latency(kube: FakeKube) -> None:
    c = kube.client
    pod = c.create(make_pod("f", namespace="faults"))
    c.add_fault(503, match="/binding", count=1)
    failed = c.bind("f", "n1", namespace="faults", uid=pod["metadata"]["uid"])
    assert failed.status_code == 503 and failed.json()["kind"] == "Status"
    assert c.bind("f", "n1", namespace="faults", uid=pod["metadata"]["uid"]).status_code == 201
    c.set_latency(0.3)
    try:
        began = time.monotonic()
        c.get("Pod", "f", "faults")
        assert time.monotonic() - began >= 0.3
    finally:
        c.set_latency(0)
        c.clear_faults()


def test_kubeconfig_file_is_written(tmp_path: Path, fake_kube: FakeKube) -> None:
    assert fake_kube.kubeconfig_path.exists() and fake_kube.kubeconfig_path.parent == tmp_path
