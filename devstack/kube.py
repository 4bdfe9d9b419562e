"""A small synchronous Kubernetes client for the demo and the end-to-end tests: objects as plain dicts.

Nodes are created with the status a kubelet would report (capacity, allocatable, Ready) and
exactly the taints the test asks for; pods get ``terminationGracePeriodSeconds: 0`` so they
vanish on delete without a kubelet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import httpx
import yaml

from devstack.controlplane import REPO, utc_now

T = TypeVar("T")
MERGE = {"Content-Type": "application/merge-patch+json"}
PAUSE_IMAGE = "registry.invalid/pause:3.9"  # never pulled: no kubelet runs


class KubeError(RuntimeError):
    pass


def _check(resp: httpx.Response, ok: Iterable[int] = (200, 201, 202)) -> dict[str, Any]:
    if resp.status_code not in ok:
        raise KubeError(f"{resp.request.method} {resp.request.url.path}: {resp.status_code} {resp.text[:500]}")
    return resp.json() if resp.content else {}


def wait_for(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
    """``check()``'s first truthy answer; TimeoutError naming ``what`` and the last answer otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = check()
    while not last:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout:.0f}s (last: {last!r})")
        time.sleep(interval)
        last = check()
    return last


def resources(cpu: str | None = None, memory: str | None = None, **extended: str) -> dict[str, str]:
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out.update({k.replace("__", "/").replace("_", "."): v for k, v in extended.items()})
    return out


class Kube:
    def __init__(self, client: httpx.Client) -> None:
        self.http = client

    # --- namespaces ----------------------------------------------------------------------------

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        _check(self.http.post("/api/v1/namespaces", json=body), (201, 409))
        # No controller-manager creates it, and the ServiceAccount admission plugin needs it.
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        _check(self.http.post(f"/api/v1/namespaces/{name}/serviceaccounts", json=sa), (201, 409))

    def delete_namespace_pods(self, namespace: str, attempts: int = 20) -> None:
        """Every pod of ``namespace`` deleted. The API server deletes a collection item by item and answers
        504 when its request timeout (a minute) passes first, 10000 pods on a slow machine: what it deleted
        stays deleted, so the same request goes again for the rest."""
        for _ in range(max(attempts, 1)):
            resp = self.http.delete(f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"})
            if resp.status_code != 504:
                break
        _check(resp, (200, 404))

    # --- nodes ---------------------------------------------------------------------------------

    def create_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: int = 110,
        extended: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A node as a kubelet would register it, Ready, with exactly ``taints``."""
        all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels}}
        _check(self.http.post("/api/v1/nodes", json=body))
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extended or {})}
        now = utc_now()
        status: dict[str, Any] = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "e2e",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "images": images or [],
        }
        _check(self.http.patch(f"/api/v1/nodes/{name}/status", json={"status": status}, headers=MERGE))
        # Admission gave the node the not-ready taint; a merge patch replaces the whole list.
        return _check(self.http.patch(f"/api/v1/nodes/{name}", json={"spec": {"taints": taints or []}}, headers=MERGE))

    def delete_node(self, name: str) -> None:
        _check(self.http.delete(f"/api/v1/nodes/{name}"), (200, 404))

    def nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else {}
        items: list[dict[str, Any]] = _check(self.http.get("/api/v1/nodes", params=params))["items"]
        return items

    # --- pods ----------------------------------------------------------------------------------

    def pod_body(
        self,
        name: str,
        *,
        scheduler: str,
        requests: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": PAUSE_IMAGE}
        if requests:
            container["resources"] = {"requests": dict(requests)}
            extended = {k: v for k, v in requests.items() if "/" in k}
            if extended:  # extended resources need limits equal to requests
                container["resources"]["limits"] = extended
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": {
                "schedulerName": scheduler,
                "terminationGracePeriodSeconds": 0,
                "containers": [container],
                **spec,
            },
        }

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return _check(self.http.post(f"/api/v1/namespaces/{namespace}/pods", json=body))

    def pods(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else {}
        items: list[dict[str, Any]] = _check(self.http.get(f"/api/v1/namespaces/{namespace}/pods", params=params))[
            "items"
        ]
        return items

    def placement(self, namespace: str, label_selector: str | None = None) -> dict[str, str]:
        """``{pod name: node name or ""}``."""
        return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in self.pods(namespace, label_selector)}

    def delete_pod(self, namespace: str, name: str) -> None:
        _check(
            self.http.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", params={"gracePeriodSeconds": "0"}),
            (200, 404),
        )

    def delete_pods(self, namespace: str, label_selector: str) -> None:
        _check(
            self.http.delete(
                f"/api/v1/namespaces/{namespace}/pods",
                params={"labelSelector": label_selector, "gracePeriodSeconds": "0"},
            ),
            (200, 404),
        )

    def events(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = _check(self.http.get(f"/api/v1/namespaces/{namespace}/events"))["items"]
        return items

    # --- other objects -------------------------------------------------------------------------

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return _check(self.http.post(path, json=body), (200, 201))

    def delete(self, path: str) -> None:
        _check(self.http.delete(path), (200, 202, 404))

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (``None`` removes a key)."""
        return _check(self.http.patch(path, json=body, headers=MERGE))

    def get(self, path: str) -> dict[str, Any] | None:
        resp = self.http.get(path)
        if resp.status_code == 404:
            return None
        return _check(resp)


def install_podgroup_crd(kube: Kube) -> None:
    """The PodGroup CRD from deploy/, established before any stack starts (replicas probe for it once
    at start and then only every so often)."""
    crd = yaml.safe_load((REPO / "deploy" / "crds" / "podgroups.scheduling.x-k8s.io.yaml").read_text())
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    kube.create(path, crd)

    def established() -> bool:
        obj = kube.get(f"{path}/{crd['metadata']['name']}") or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    wait_for(established, 30, "the PodGroup CRD established")
    wait_for(lambda: kube.get("/apis/scheduling.x-k8s.io/v1alpha1/podgroups") is not None, 30, "PodGroups served")


def priority_class(name: str, value: int) -> dict[str, Any]:
    """A PriorityClass that may preempt lower ones (kube-scheduler's default policy)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }
