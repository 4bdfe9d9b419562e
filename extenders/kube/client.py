"""The few Kubernetes API calls the extender makes: list, watch, get, and bind.

Plain JSON over httpx rather than a generated client: the watcher reduces objects to
scheduling views straight away, and a watch is just newline-delimited JSON events.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from extenders.kube.direct_post import DirectPost

log = logging.getLogger(__name__)


def rfc3339(seconds: float) -> str:
    """A Unix time as the API's timestamps write it (whole seconds, UTC)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


PODGROUP_GROUP_VERSION = "scheduling.x-k8s.io/v1alpha1"
PODGROUPS_PATH = f"/apis/{PODGROUP_GROUP_VERSION}/podgroups"


class KubeApiError(Exception):
    """A non-success answer from the API server (or a watch ERROR event)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class GoneError(KubeApiError):
    """410 Gone: the resourceVersion is too old; the caller must list again."""


def _status_error(status: int, body: Any) -> KubeApiError:
    message, reason = "", ""
    if isinstance(body, dict):
        message = str(body.get("message") or "")
        reason = str(body.get("reason") or "")
        status = int(body.get("code") or status)
    cls = GoneError if status == 410 else KubeApiError
    return cls(status, message or "request failed", reason)


def _error_from_response(resp: httpx.Response) -> KubeApiError:
    return _error_from(resp.status_code, resp.content)


def _error_from(status: int, content: bytes) -> KubeApiError:
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = {"message": content[:500].decode(errors="replace")}
    return _status_error(status, body)


@dataclass(slots=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str


def _segment(text: str) -> str:
    """``text`` as one URL path segment: a "/" or ".." in a name from a request cannot reach another path."""
    if text in (".", ".."):  # a bare dot segment would be resolved away by the URL parser
        return text.replace(".", "%2E")
    return quote(text, safe="")


def _unsent(exc: httpx.HTTPError) -> bool:
    """The request surely never reached the API server: it failed while connecting."""
    return isinstance(
        exc,
        httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.ProxyError | httpx.UnsupportedProtocol,
    )


class BindStatus(enum.Enum):
    BOUND = "bound"
    ALREADY_BOUND = "already-bound-same-node"  # a retry of a bind that already happened: success
    BOUND_ELSEWHERE = "bound-elsewhere"
    NOT_FOUND = "not-found"
    UID_MISMATCH = "uid-mismatch"  # the name now belongs to another pod
    ERROR = "error"


@dataclass(slots=True, frozen=True)
class BindResult:
    status: BindStatus
    message: str = ""
    node: str = ""  # where the pod is bound (BOUND, ALREADY_BOUND, BOUND_ELSEWHERE)
    # An ERROR after the request may have reached the API server (a read timeout, a dropped
    # connection): the API server may still create the Binding.
    uncertain: bool = False

    @property
    def ok(self) -> bool:
        return self.status in (BindStatus.BOUND, BindStatus.ALREADY_BOUND)


class KubeClient:
    """Typed calls over one ``httpx.AsyncClient`` whose base_url is the API server."""

    def __init__(self, http: httpx.AsyncClient, page_size: int = 500) -> None:
        self.http = http
        self.page_size = page_size
        # The Bindings go out through aiohttp's pool directly when the client's wire is that pool.
        self.direct = DirectPost.over(http)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get(self, path: str) -> dict[str, Any] | None:
        """An object, or None on 404."""
        resp = await self.http.get(path)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise _error_from_response(resp)
        body: dict[str, Any] = orjson.loads(resp.content)
        return body

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.get(f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}")

    async def has_podgroups(self) -> bool:
        """Whether the PodGroup CRD is served (a 404 on its collection means no)."""
        return await self.readable(PODGROUPS_PATH)

    async def readable(self, path: str) -> bool:
        """Whether a collection is served: False on 404, raises on other errors (401/403 included)."""
        resp = await self.http.get(path, params={"limit": "1"})
        if resp.status_code == 404:
            return False
        if resp.status_code != 200:
            raise _error_from_response(resp)
        return True

    async def list(self, path: str, page_size: int | None = None) -> ListResult:
        """Every object of a collection, following ``continue`` tokens; one consistent resourceVersion.

        Raises GoneError when a continue token expired (the caller lists again from scratch).
        """
        items: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": str(page_size or self.page_size)}
        while True:
            resp = await self.http.get(path, params=params)
            if resp.status_code != 200:
                raise _error_from_response(resp)
            body = orjson.loads(resp.content)
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return ListResult(items, str(meta.get("resourceVersion") or ""))
            params["continue"] = token

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        """Events (``{"type", "object"}``) from ``resource_version`` on, until the server ends the stream.

        BOOKMARK events are passed through. A 410, as the HTTP status or as an ERROR event
        carrying a Status with code 410, raises GoneError; other ERROR events raise KubeApiError.
        """
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = httpx.Timeout(10.0, read=timeout_seconds + 30.0)
        async with self.http.stream("GET", path, params=params, timeout=timeout) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise _error_from_response(resp)
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    raise _status_error(500, event.get("object") or {})
                yield event

    async def annotate_pod(self, namespace: str, name: str, uid: str, annotations: dict[str, str]) -> bool:
        """Merge ``annotations`` into a pod's metadata; False when the pod is gone or was replaced
        (the UID in the patch must match the pod's, so a pod recreated under the name is left alone)."""
        body = {"metadata": {"uid": uid, "annotations": annotations}}
        return await self._patch_pod(namespace, name, body, "application/merge-patch+json")

    async def remove_scheduling_gate(self, namespace: str, name: str, uid: str, gate: str, position: int) -> bool:
        """Remove the pod's scheduling gate ``gate``, at ``position`` in its gates as last seen. False
        when the pod is gone or replaced, or its gates changed since (a JSON patch whose tests fail
        changes nothing): the caller looks again."""
        body = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "test", "path": f"/spec/schedulingGates/{position}/name", "value": gate},
            {"op": "remove", "path": f"/spec/schedulingGates/{position}"},
        ]
        return await self._patch_pod(namespace, name, body, "application/json-patch+json")

    async def _patch_pod(self, namespace: str, name: str, body: Any, content_type: str) -> bool:
        """A pod patch guarded by its UID: False when the pod is gone, replaced, or the guard failed."""
        path = f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}"
        resp = await self.http.patch(path, content=orjson.dumps(body), headers={"Content-Type": content_type})
        if resp.status_code == 200:
            return True
        if resp.status_code in (404, 409, 422):
            return False
        raise _error_from_response(resp)

    async def preempt_pod(self, namespace: str, name: str, uid: str, message: str) -> bool:
        """Evict a pod as kube-scheduler evicts its preemption victims: a DisruptionTarget condition
        (so a Job's pod failure policy tells a disruption from a failure), then a delete; both with
        the pod's UID as precondition. False when the pod is gone or was replaced."""
        path = f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}"
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": message,
            "lastTransitionTime": rfc3339(time.time()),
        }
        body = {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}
        resp = await self.http.patch(
            f"{path}/status",
            content=orjson.dumps(body),
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        if resp.status_code in (404, 409):
            return False
        if resp.status_code != 200:
            raise _error_from_response(resp)
        resp = await self.http.request(
            "DELETE",
            path,
            content=orjson.dumps({"preconditions": {"uid": uid}}),
            headers={"Content-Type": "application/json"},
        )
        if resp.status_code in (200, 202):
            return True
        if resp.status_code in (404, 409):
            return False
        raise _error_from_response(resp)

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        """POST a core/v1 Event (the API kubectl describe reads)."""
        path = f"/api/v1/namespaces/{_segment(namespace)}/events"
        resp = await self.http.post(path, content=orjson.dumps(event), headers={"Content-Type": "application/json"})
        if resp.status_code not in (200, 201):
            raise _error_from_response(resp)

    async def patch_event(self, namespace: str, name: str, changes: dict[str, Any]) -> bool:
        """Merge ``changes`` into an Event; False when it is gone (Events expire after an hour)."""
        return await self._merge_patch(f"/api/v1/namespaces/{_segment(namespace)}/events/{_segment(name)}", changes)

    async def patch_podgroup_status(self, namespace: str, name: str, status: dict[str, Any]) -> bool:
        """Merge ``status`` into a PodGroup's status subresource; False when the PodGroup is gone."""
        path = f"/apis/{PODGROUP_GROUP_VERSION}/namespaces/{_segment(namespace)}/podgroups/{_segment(name)}/status"
        return await self._merge_patch(path, {"status": status})

    async def _merge_patch(self, path: str, body: dict[str, Any]) -> bool:
        resp = await self.http.patch(
            path, content=orjson.dumps(body), headers={"Content-Type": "application/merge-patch+json"}
        )
        if resp.status_code == 404:
            return False
        if resp.status_code != 200:
            raise _error_from_response(resp)
        return True

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> BindResult:
        """Create the pod's Binding with its UID as precondition, and say what happened.

        A 409 is resolved by reading the pod: bound to this node already (a retry: success),
        bound elsewhere, gone, or replaced by a pod with another UID.
        """
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(name)}/binding"
        content = orjson.dumps(body)
        try:
            answer = await self.direct.post(path, content) if self.direct is not None else None
            if answer is None:
                resp = await self.http.post(path, content=content, headers={"Content-Type": "application/json"})
                answer = resp.status_code, resp.content
        except httpx.HTTPError as exc:
            return BindResult(BindStatus.ERROR, f"binding {namespace}/{name}: {exc!r}", uncertain=not _unsent(exc))
        status, raw = answer
        if status in (200, 201):
            return BindResult(BindStatus.BOUND, node=node)
        error = _error_from(status, raw)
        if status == 404:
            return BindResult(BindStatus.NOT_FOUND, error.message)
        if status != 409:
            return BindResult(BindStatus.ERROR, str(error))
        try:
            pod = await self.get_pod(namespace, name)
        except (httpx.HTTPError, KubeApiError) as exc:
            return BindResult(BindStatus.ERROR, f"{error}; then reading the pod failed: {exc}")
        if pod is None:
            return BindResult(BindStatus.NOT_FOUND, error.message)
        actual_uid = (pod.get("metadata") or {}).get("uid") or ""
        if uid and actual_uid != uid:
            return BindResult(BindStatus.UID_MISMATCH, f"pod {namespace}/{name} now has uid {actual_uid}, not {uid}")
        bound_to = (pod.get("spec") or {}).get("nodeName") or ""
        if bound_to == node:
            return BindResult(BindStatus.ALREADY_BOUND, node=node)
        if bound_to:
            return BindResult(BindStatus.BOUND_ELSEWHERE, f"pod {namespace}/{name} is bound to {bound_to}", bound_to)
        return BindResult(BindStatus.ERROR, str(error))
