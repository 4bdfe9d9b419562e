"""The end-to-end throughput benchmark's pods: Deployment-like apps, a fifth with required hostname
anti-affinity, a fifth with a zone spread constraint."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from devstack.kube import Kube, resources

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
POD_CPU = "100m"
POD_MEMORY = "128Mi"


def app_kind(index: int) -> str:
    """Which constraint app ``index`` carries: a fifth anti-affinity, a fifth spread, the rest none."""
    return ("anti-affinity", "spread", "plain", "plain", "plain")[index % 5]


def pod_bodies(kube: Kube, scheduler: str, pods: int, apps: int) -> list[dict[str, Any]]:
    owners = [str(uuid.uuid4()) for _ in range(apps)]
    bodies = []
    for i in range(pods):
        app = i % apps
        labels = {"app": f"app-{app}"}
        spec: dict[str, Any] = {}
        kind = app_kind(app)
        if kind == "anti-affinity":
            term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        elif kind == "spread":
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": labels},
                }
            ]
        body = kube.pod_body(
            f"app-{app}-{i}",
            scheduler=scheduler,
            requests=resources(cpu=POD_CPU, memory=POD_MEMORY),
            labels=labels,
            **spec,
        )
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"app-{app}",
                "uid": owners[app],
                "controller": True,
            }
        ]
        bodies.append(body)
    return bodies


def create_all(kube: Kube, namespace: str, bodies: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda body: kube.create_pod(namespace, body), bodies))
    return time.perf_counter() - start
