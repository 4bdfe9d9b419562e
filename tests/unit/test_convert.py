"""Kubernetes objects reduced to the scheduling view: what each keeps and drops."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.model import ControllerInfo, Owner, ServiceInfo, Taint
from extenders.sync.convert import controller_info, node_facts, pod_info, service_info
from tests.unit.k8s_objects import full_pod, node_object

GI = 2**30


def test_pod_from_k8s_keeps_what_scheduling_reads() -> None:
    pod = pod_info(full_pod())
    assert (pod.namespace, pod.name, pod.uid, pod.key) == ("shop", "web-1", "u-1", "shop/web-1")
    assert pod.node_name == "n1" and pod.phase == "Running" and pod.priority == 100
    assert pod.preemption_policy == "Never" and pod.scheduler_name == "my-scheduler"
    assert pod.requests == {"cpu": 250, "memory": GI, "nvidia.com/gpu": 1}
    # the init container is defaulted to 100m / 200Mi, below the main container: the max is the main one
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (250, GI)
    assert not pod.best_effort
    # the plain init container's host port is released before the pod runs: not held
    assert pod.host_ports == [("TCP", "0.0.0.0", 8080)]
    assert pod.volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    assert pod.images == ["busybox", "nginx:1"]
    assert pod.owner == Owner("ReplicaSet", "web", "o-1", api_version="apps/v1", controller=True)
    assert pod.terminating and not pod.terminal
    assert pod.has_pod_affinity() and pod.has_required_anti_affinity()


def test_node_facts_from_k8s() -> None:
    facts = node_facts(node_object())
    assert facts.name == "n1" and facts.uid == "nu" and facts.resource_version == "42"
    assert facts.allocatable == {"cpu": 3920, "memory": 16 * GI, "pods": 110, "nvidia.com/gpu": 2}
    assert facts.taints == [Taint("k", "v", "NoSchedule"), Taint("e", "", "NoExecute")]
    assert facts.unschedulable
    assert facts.conditions == {"Ready": "True", "DiskPressure": "False"}
    assert facts.images == {"nginx:1": 1000, "nginx@sha256:x": 1000}
    assert facts.annotations == {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}"}


def _port(host_port: int, protocol: str = "TCP", host_ip: str = "") -> dict[str, Any]:
    port: dict[str, Any] = {"containerPort": 1, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        port["hostIP"] = host_ip
    return port


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"name": "c", "ports": [_port(80)]}]}, [("TCP", "0.0.0.0", 80)]),
        ({"initContainers": [{"name": "i", "ports": [_port(53, "UDP")]}]}, []),
        (
            {"initContainers": [{"name": "s", "restartPolicy": "Always", "ports": [_port(53, "UDP", "10.0.0.1")]}]},
            [("UDP", "10.0.0.1", 53)],
        ),
        (
            {
                "containers": [{"name": "c", "ports": [_port(80), {"containerPort": 81}]}],
                "initContainers": [
                    {"name": "i", "ports": [_port(8080)]},
                    {"name": "s", "restartPolicy": "Always", "ports": [_port(9090)]},
                    {"name": "o", "restartPolicy": "OnFailure", "ports": [_port(7070)]},
                ],
            },
            [("TCP", "0.0.0.0", 9090), ("TCP", "0.0.0.0", 80)],
        ),
    ],
)
def test_host_ports_come_from_containers_and_sidecars(
    spec: dict[str, Any], expected: list[tuple[str, str, int]]
) -> None:
    assert pod_info({"metadata": {"name": "p"}, "spec": spec}).host_ports == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"name": "c", "image": "app:1"}]}, ["app:1"]),
        (
            {
                "containers": [{"name": "c", "image": "app:1"}, {"name": "d", "image": "app:1"}],
                "initContainers": [{"name": "i", "image": "init:1"}, {"name": "s", "image": "proxy:1"}],
                "volumes": [
                    {"name": "model", "image": {"reference": "models/llm:7b"}},
                    {"name": "tmp", "emptyDir": {}},
                ],
            },
            ["init:1", "proxy:1", "app:1", "app:1", "models/llm:7b"],
        ),
    ],
)
def test_images_of_init_containers_containers_and_image_volumes(spec: dict[str, Any], expected: list[str]) -> None:
    assert pod_info({"metadata": {"name": "p"}, "spec": spec}).images == expected


def test_pod_info_counts_pod_level_resources_and_resize_status() -> None:
    pod = pod_info(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "resources": {"requests": {"memory": "2Gi"}},
            },
            "status": {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "3"}}]},
        }
    )
    assert pod.requests == {"cpu": 3000, "memory": 2 * GI}
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (3000, 2 * GI)


def test_a_name_an_image_lists_twice_keeps_its_first_size() -> None:
    node = node_object()
    node["status"]["images"] = [{"names": ["a:1"], "sizeBytes": 10}, {"names": ["a:1", "b:1"], "sizeBytes": 20}]
    assert node_facts(node).images == {"a:1": 10, "b:1": 20}


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        (None, None),
        (
            [{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": "u", "controller": True}],
            Owner("ReplicationController", "rc", "u", "v1", True),
        ),
        # no controller among them: the first, marked as not controlling (DefaultSelector ignores it)
        (
            [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
            Owner("ReplicaSet", "rs", "u", "apps/v1"),
        ),
        ([{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": False}], Owner("ReplicaSet", "rs", "u")),
    ],
)
def test_the_owner_keeps_its_api_version_and_whether_it_controls(
    refs: list[dict[str, Any]] | None, expected: Owner | None
) -> None:
    assert pod_info({"metadata": {"name": "p", "ownerReferences": refs}}).owner == expected


def test_services_and_controllers_keep_only_their_selectors() -> None:
    service = service_info(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
    )
    assert service == ServiceInfo("shop", "web", {"app": "web"}) and service.key == "shop/web"
    assert service_info({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName"}}) == ServiceInfo(
        "default", "ext"
    )
    selector = {"matchLabels": {"app": "web", "pod-template-hash": "5d4f"}}
    replica_set = controller_info(
        {"metadata": {"name": "web-5d4f", "namespace": "shop"}, "spec": {"replicas": 3, "selector": selector}}
    )
    assert replica_set == ControllerInfo("shop", "web-5d4f", selector)
    rc = controller_info({"metadata": {"name": "old"}, "spec": {"selector": {"app": "old"}, "template": {}}})
    assert rc == ControllerInfo("default", "old", {"app": "old"})
    assert controller_info({"metadata": {"name": "bare"}, "spec": {}}).selector is None
