"""A small synchronous client for tests: CRUD and admin calls against the fake (or any kube-apiserver, for
the Kubernetes calls). The objects it sends are built in tests/fake_kube/builders.py."""

from __future__ import annotations

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
    "resource_path",
    "resource_type",
]
