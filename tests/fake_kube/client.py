"""A small synchronous client for tests: object builders and CRUD/admin calls against the fake
(or any kube-apiserver, for the Kubernetes calls)."""

from __future__ import annotations

import copy
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson

from .resources import ALL, NODES, PODS, ResourceType

Json = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class KubeApiError(Exception):
    """A non-2xx answer; `body` is the Status the server sent."""

    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        try:
            self.body: Json = response.json()
        except ValueError:
            self.body = {"message": response.text}
        self.reason: str = self.body.get("reason", "")
        super().__init__(f"{response.request.method} {response.request.url}: {self.status_code} {self.body}")


def resource_type(kind_or_plural: str) -> ResourceType:
    for rtype in ALL:
        if kind_or_plural in (rtype.kind, rtype.plural):
            return rtype
    raise KeyError(kind_or_plural)


def resource_path(
    rtype: ResourceType, namespace: str | None = None, name: str | None = None, sub: str | None = None
) -> str:
    path = rtype.prefix
    if rtype.namespaced and namespace is not None:
        path += f"/namespaces/{namespace}"
    path += f"/{rtype.plural}"
    if name is not None:
        path += f"/{name}"
    if sub is not None:
        path += f"/{sub}"
    return path


# -- builders -------------------------------------------------------------------------------------


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[Json] | None = None,
    extra_allocatable: dict[str, str] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Json:
    """A node as a kubelet registers it: capacity = allocatable, Ready and the pressure conditions."""
    allocatable = {
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "ephemeral-storage": "100Gi",
        **(extra_allocatable or {}),
    }
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": ""}
        for t, r in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "",
        }
    )
    spec: Json = {}
    if taints:
        spec["taints"] = copy.deepcopy(taints)
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.0", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def make_pod(
    name: str,
    namespace: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    extra_requests: dict[str, str] | None = None,
    phase: str | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[Json] | None = None,
    scheduler_name: str | None = None,
) -> Json:
    """A one-container pod; `phase` defaults to Running when `node_name` is set, else Pending."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra_requests or {})
    container: Json = {"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    spec: Json = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = copy.deepcopy(tolerations)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    metadata: Json = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    status: Json = {"phase": phase or ("Running" if node_name else "Pending")}
    if node_name:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def make_pdb(
    name: str,
    namespace: str = "default",
    match_labels: dict[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 0,
    current_healthy: int = 0,
    desired_healthy: int = 0,
    expected_pods: int = 0,
) -> Json:
    """A policy/v1 PDB; the status fields stand in for what the disruption controller would write."""
    spec: Json = {"selector": {"matchLabels": dict(match_labels or {})}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": current_healthy,
            "desiredHealthy": desired_healthy,
            "expectedPods": expected_pods,
            "observedGeneration": 1,
        },
    }


def make_podgroup(
    name: str,
    namespace: str = "default",
    min_member: int = 1,
    min_resources: dict[str, str] | None = None,
    schedule_timeout_seconds: int | None = None,
) -> Json:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1)."""
    spec: Json = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = dict(min_resources)
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def make_namespace(name: str, labels: dict[str, str] | None = None) -> Json:
    """A v1.Namespace (the server adds its kubernetes.io/metadata.name label)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def make_pvc(name: str, namespace: str = "default", access_modes: list[str] | None = None) -> Json:
    """A v1.PersistentVolumeClaim asking for 1Gi with ``access_modes`` (ReadWriteOnce by default)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": list(access_modes or ["ReadWriteOnce"]),
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def make_service(name: str, namespace: str = "default", selector: dict[str, str] | None = None) -> Json:
    """A ClusterIP v1.Service on port 80 selecting ``selector`` (none: a Service without a selector)."""
    spec: Json = {"ports": [{"port": 80, "protocol": "TCP"}]}
    if selector is not None:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _template(labels: dict[str, str]) -> Json:
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def make_workload(
    kind: str, name: str, namespace: str = "default", selector: Json | None = None, replicas: int = 1
) -> Json:
    """A ReplicationController (``selector`` a label map), ReplicaSet or StatefulSet (a LabelSelector)
    with a pod template carrying the selector's labels."""
    if kind == "ReplicationController":
        labels = dict(selector or {})
        return {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": labels, "template": _template(labels)},
        }
    label_selector = selector if selector is not None else {"matchLabels": {"app": name}}
    spec: Json = {
        "replicas": replicas,
        "selector": label_selector,
        "template": _template(label_selector.get("matchLabels") or {}),
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


# -- client ---------------------------------------------------------------------------------------


class WatchStream:
    """The events of one open watch, read line by line (blocks up to the client's read timeout)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def next(self) -> Json | None:
        """The next event, or None when the server closed the stream."""
        for line in self._lines:
            if line.strip():
                event: Json = orjson.loads(line)
                return event
        return None

    def take(self, n: int) -> list[Json]:
        events: list[Json] = []
        while len(events) < n and (event := self.next()) is not None:
            events.append(event)
        return events


class FakeKubeClient:
    def __init__(
        self, url: str, token: str | None = None, timeout: float = 5.0, verify: ssl.SSLContext | bool = True
    ) -> None:
        """``verify``: for an https fake, an SSLContext trusting its CA (and holding a client certificate
        when the server requires one)."""
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=verify)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A raw call: no error raised, for tests that assert on status codes and Status bodies."""
        return self.http.request(method, path, **kwargs)

    def _call(self, method: str, path: str, **kwargs: Any) -> Json:
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 300:
            raise KubeApiError(response)
        body: Json = response.json()
        return body

    # Kubernetes API

    def create(self, obj: Json, with_status: bool = True) -> Json:
        """POST the object; with `with_status`, then write its .status through /status as a controller
        or kubelet would (the API ignores or resets status on create for pods, PDBs and podgroups)."""
        rtype = resource_type(obj["kind"])
        namespace = obj["metadata"].get("namespace", "default") if rtype.namespaced else None
        created = self._call("POST", resource_path(rtype, namespace), json=obj)
        if with_status and "status" in obj and created.get("status") != obj["status"]:
            created = self._call(
                "PUT",
                resource_path(rtype, namespace, created["metadata"]["name"], "status"),
                json={**created, "status": obj["status"]},
            )
        return created

    def get(self, kind: str, name: str, namespace: str | None = "default") -> Json:
        return self._call("GET", resource_path(resource_type(kind), namespace, name))

    def list(self, kind: str, namespace: str | None = None, **params: Any) -> Json:
        return self._call("GET", resource_path(resource_type(kind), namespace), params=params)

    def replace(self, obj: Json, status: bool = False) -> Json:
        rtype = resource_type(obj["kind"])
        meta = obj["metadata"]
        path = resource_path(rtype, meta.get("namespace"), meta["name"], "status" if status else None)
        return self._call("PUT", path, json=obj)

    def patch(
        self,
        kind: str,
        name: str,
        patch: Json,
        namespace: str | None = "default",
        status: bool = False,
        content_type: str = MERGE_PATCH,
    ) -> Json:
        path = resource_path(resource_type(kind), namespace, name, "status" if status else None)
        return self._call("PATCH", path, content=orjson.dumps(patch), headers={"Content-Type": content_type})

    def delete(
        self,
        kind: str,
        name: str,
        namespace: str | None = "default",
        grace_period: int | None = None,
        uid: str | None = None,
    ) -> Json:
        options: Json = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return self._call("DELETE", resource_path(resource_type(kind), namespace, name), json=options)

    def bind(self, name: str, node: str, namespace: str = "default", uid: str | None = None) -> httpx.Response:
        """POST a v1 Binding as the extender does; returns the raw response (201 or a Status error)."""
        meta: Json = {"name": name, "namespace": namespace}
        if uid is not None:
            meta["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.http.post(resource_path(PODS, namespace, name, "binding"), json=body)

    @contextmanager
    def watch(self, kind: str, namespace: str | None = None, **params: Any) -> Iterator[WatchStream]:
        """An open watch; the server has registered it once this context is entered."""
        query = {"watch": "1", **{k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}}
        with self.http.stream("GET", resource_path(resource_type(kind), namespace), params=query) as response:
            if response.status_code != 200:
                response.read()
                raise KubeApiError(response)
            yield WatchStream(response)

    # Admin API of the fake

    def stats(self) -> Json:
        return self._call("GET", "/_fake/stats")

    def reset_stats(self) -> None:
        self._call("DELETE", "/_fake/stats")

    def compact(self) -> int:
        return int(self._call("POST", "/_fake/compact")["compactedResourceVersion"])

    def break_watches(self, resource: str | None = None) -> int:
        params = {"resource": resource} if resource else {}
        return int(self._call("POST", "/_fake/break-watches", params=params)["closed"])

    def set_latency(self, seconds: float, match: str = "", commit: bool = True) -> None:
        """Delay every request by ``seconds``, or with ``match`` only those whose "METHOD path?query" has it;
        ``commit=False``: such a request then answers 504 without being carried out."""
        self._call("POST", "/_fake/latency", json={"seconds": seconds, "match": match, "commit": commit})

    def rotate_token(self, token: str) -> None:
        """From now on API requests need ``token`` (this client's own included)."""
        self._call("POST", "/_fake/token", json={"token": token})
        self.http.headers["Authorization"] = f"Bearer {token}"

    def add_fault(self, code: int, match: str = "", count: int | None = 1, message: str = "injected fault") -> None:
        self._call("POST", "/_fake/faults", json={"code": code, "match": match, "count": count, "message": message})

    def clear_faults(self) -> None:
        self._call("DELETE", "/_fake/faults")

    def set_podgroups(self, enabled: bool) -> None:
        self._call("POST", "/_fake/podgroups", json={"enabled": enabled})


__all__ = [
    "NODES",
    "PODS",
    "FakeKubeClient",
    "KubeApiError",
    "WatchStream",
    "make_node",
    "make_pdb",
    "make_pod",
    "make_podgroup",
    "resource_path",
    "resource_type",
]
