"""Objects as the Kubernetes API serves them, for the conversion and record tests."""

from __future__ import annotations

from typing import Any


def full_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "uid": "u-1",
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "deletionTimestamp": "2024-01-02T00:00:00Z",
            "ownerReferences": [
                {"kind": "Other", "name": "x", "uid": "o-0"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "o-1", "controller": True},
            ],
        },
        "spec": {
            "nodeName": "n1",
            "priority": 100,
            "preemptionPolicy": "Never",
            "schedulerName": "my-scheduler",
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "z"}]}},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "tmp", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "image": "nginx:1",
                    "resources": {"requests": {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}],
                }
            ],
            "initContainers": [
                {
                    "name": "init",
                    "image": "busybox",
                    "ports": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
                }
            ],
        },
        "status": {"phase": "Running", "startTime": "2024-01-01T00:00:05Z"},
    }


def node_object() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n1",
            "uid": "nu",
            "resourceVersion": "42",
            "labels": {"zone": "a"},
            "annotations": {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}", "other": "dropped"},
        },
        "spec": {
            "unschedulable": True,
            "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "e", "effect": "NoExecute"}],
        },
        "status": {
            "allocatable": {"cpu": "3920m", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"},
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}],
            "images": [{"names": ["nginx:1", "nginx@sha256:x"], "sizeBytes": 1000}],
        },
    }
