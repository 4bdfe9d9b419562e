"""HTTP layer of the fake kube-apiserver: URL routing, query parameters, watch streams, admin API.

See the package docstring (tests/fake_kube/__init__.py) for what is and is not covered.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from . import errors
from .discovery import discovery
from .errors import ApiError, Json
from .resources import ALL, PODGROUPS, PODS, ResourceType
from .selectors import field_matcher, label_matcher
from .store import Store

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})
MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


@dataclass
class FakeConfig:
    token: str | None = None  # when set, API requests need "Authorization: Bearer <token>"
    podgroups: bool = True  # whether the PodGroup CRD is installed
    bookmark_interval: float = 60.0  # seconds between BOOKMARK events on watches that allow them
    history_limit: int = 1000  # events kept per resource for watch resumption
    default_watch_timeout: float = 1800.0  # when the client sends no timeoutSeconds


@dataclass
class Fault:
    """Answer matching requests with an error Status: `remaining` times, or until cleared when None."""

    code: int
    remaining: int | None = 1
    match: str = ""  # substring of "<METHOD> <path>?<query>"
    message: str = "injected fault"


@dataclass
class ApiRoute:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None


def _json(body: Any, code: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=code, media_type="application/json")


def _error(exc: ApiError) -> Response:
    return _json(exc.body, exc.code)


def _truthy(value: str | None) -> bool:
    return value in ("1", "true", "True")


def _int_param(value: str | None, name: str) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'{name}: Invalid value: "{value}": must be an integer') from None


def _rv_param(value: str) -> str:
    if value and not value.isdigit():
        raise errors.bad_request(f'resourceVersion: Invalid value: "{value}": must be an unsigned integer')
    return value


@dataclass
class FakeApiServer:
    config: FakeConfig
    store: Store = field(init=False)
    latency: float = 0.0
    # match -> (extra seconds for requests whose target has it, whether the request is then carried out)
    delays: dict[str, tuple[float, bool]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.store = Store(self.config.history_limit)

    # -- routing ----------------------------------------------------------------------------------

    def _resolve(self, path: str) -> ApiRoute | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not 1 <= len(rest) <= 3:
            return None
        for rtype in self._served():
            if (rtype.group, rtype.version, rtype.plural) == (group, version, rest[0]):
                break
        else:
            return None
        if namespace is not None and not rtype.namespaced:
            return None
        sub = rest[2] if len(rest) == 3 else None
        if sub not in (None, "status") and not (sub == "binding" and rtype is PODS):
            return None
        return ApiRoute(rtype, namespace, rest[1] if len(rest) >= 2 else None, sub)

    def _served(self) -> list[ResourceType]:
        return [rt for rt in ALL if rt is not PODGROUPS or self.config.podgroups]

    # -- entry point ------------------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        if path.startswith("/_fake/"):
            return await self._admin(request, path)
        if path in ("/healthz", "/livez", "/readyz"):
            return Response("ok", media_type="text/plain")
        authorization = request.headers.get("authorization")
        if self.config.token and path not in PUBLIC_PATHS and authorization != f"Bearer {self.config.token}":
            return _json(errors.status_body(401, "Unauthorized", "Unauthorized"), 401)
        target = f"{request.method} {path}?{request.url.query}"
        delays = [(seconds, commit) for match, (seconds, commit) in self.delays.items() if match in target]
        delay = self.latency + sum(seconds for seconds, _ in delays)
        if delay:
            # Read first: a write is still carried out after the delay when its client gave up
            # meanwhile, as an API server may commit a write whose caller timed out.
            await request.body()
            await asyncio.sleep(delay)
            if not all(commit for _, commit in delays):
                return _json(errors.status_body(504, "request did not complete within the allowed duration"), 504)
        for fault in self.faults:
            if fault.match in target and fault.remaining != 0:
                if fault.remaining is not None:
                    fault.remaining -= 1
                return _json(errors.status_body(fault.code, fault.message), fault.code)
        try:
            if request.method == "GET" and (found := discovery(path, self._served())) is not None:
                return _json(found)
            route = self._resolve(path)
            if route is None:
                raise ApiError(404, errors.GENERIC_NOT_FOUND, "NotFound", {})
            return await self._dispatch(request, route)
        except ApiError as exc:
            return _error(exc)

    async def _body(self, request: Request) -> Any:
        raw = await request.body()
        try:
            return orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding request body: {exc}") from None

    async def _dispatch(self, request: Request, route: ApiRoute) -> Response:
        method, rtype, q = request.method, route.rtype, request.query_params
        store, count = self.store, self.store.requests
        key = (route.namespace or "", route.name or "")
        if route.name is None:  # the collection
            if method == "GET":
                match_label = label_matcher(q.get("labelSelector"))
                match_field = field_matcher(q.get("fieldSelector"), rtype)

                def match(obj: Json) -> bool:
                    return match_label(obj) and match_field(obj)

                if _truthy(q.get("watch")):
                    count["watch", rtype.plural] += 1
                    return self._watch(request, rtype, route.namespace, match)
                count["list", rtype.plural] += 1
                limit = _int_param(q.get("limit"), "limit") or 0
                rv = _rv_param(q.get("resourceVersion", ""))
                return _json(store.list_objects(rtype, route.namespace, match, limit, q.get("continue", ""), rv))
            if method == "POST" and (route.namespace is not None or not rtype.namespaced):
                count["create", rtype.plural] += 1
                return _json(store.create(rtype, route.namespace, await self._body(request)), 201)
        elif route.namespace is None and rtype.namespaced:
            pass  # a namespaced object addressed without its namespace: not a valid URL
        elif route.sub == "binding":
            if method == "POST":
                count["bind", rtype.plural] += 1
                return _json(store.bind(key, await self._body(request)), 201)
        else:
            suffix = "_status" if route.sub == "status" else ""
            if method == "GET":
                count["get" + suffix, rtype.plural] += 1
                return _json(store.get(rtype, key))
            if method == "PUT":
                count["update" + suffix, rtype.plural] += 1
                return _json(store.replace(rtype, key, await self._body(request), route.sub))
            if method == "PATCH":
                count["patch" + suffix, rtype.plural] += 1
                content_type = request.headers.get("content-type", "").split(";")[0].strip()
                if content_type not in MERGE_PATCH_TYPES:
                    raise ApiError(
                        415,
                        "the body of the request was in an unknown format - accepted media types include: "
                        + ", ".join(MERGE_PATCH_TYPES),
                    )
                return _json(store.patch(rtype, key, await self._body(request), route.sub))
            if method == "DELETE" and route.sub is None:
                count["delete", rtype.plural] += 1
                grace = _int_param(q.get("gracePeriodSeconds"), "gracePeriodSeconds")
                code, body = store.delete(rtype, key, await self._body(request), grace)
                return _json(body, code)
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    # -- watch ------------------------------------------------------------------------------------

    def _watch(self, request: Request, rtype: ResourceType, namespace: str | None, match: Any) -> Response:
        q = request.query_params
        rv = _rv_param(q.get("resourceVersion", ""))
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        send_initial = _truthy(q.get("sendInitialEvents"))
        if send_initial and not bookmarks:
            raise errors.invalid(
                "ListOptions",
                "",
                "allowWatchBookmarks: Required value: allowWatchBookmarks must be true if sendInitialEvents = true",
            )
        timeout = _int_param(q.get("timeoutSeconds"), "timeoutSeconds") or self.config.default_watch_timeout
        try:
            first, watch = self.store.subscribe(rtype, namespace, match, rv, rv in ("", "0") or send_initial)
        except ApiError as exc:  # like the real server: 200, then one ERROR event carrying the Status
            return self._stream(self._one_error(exc))
        store, interval = self.store, self.config.bookmark_interval

        def line(etype: str, obj: Json) -> bytes:
            return orjson.dumps({"type": etype, "object": obj}) + b"\n"

        def bookmark(annotations: dict[str, str] | None = None) -> bytes:
            meta: Json = {"resourceVersion": str(store.rv), "creationTimestamp": None}
            if annotations:
                meta["annotations"] = annotations
            return line("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta})

        async def events() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            try:
                for etype, obj in first:
                    yield line(etype, obj)
                if send_initial:
                    yield bookmark({"k8s.io/initial-events-end": "true"})
                deadline = loop.time() + timeout
                next_bookmark = loop.time() + interval if bookmarks else math.inf
                while (now := loop.time()) < deadline:
                    try:
                        item = await asyncio.wait_for(watch.queue.get(), min(deadline, next_bookmark) - now)
                    except TimeoutError:
                        # the queue is empty, so every event up to store.rv has been sent: safe to bookmark
                        if loop.time() >= next_bookmark:
                            next_bookmark = loop.time() + interval
                            yield bookmark()
                        continue
                    if item is None:
                        return
                    yield line(*item)
            finally:
                store.unsubscribe(watch)

        return self._stream(events())

    @staticmethod
    async def _one_error(exc: ApiError) -> AsyncIterator[bytes]:
        yield orjson.dumps({"type": "ERROR", "object": exc.body}) + b"\n"

    @staticmethod
    def _stream(body: AsyncIterator[bytes]) -> Response:
        return StreamingResponse(body, media_type="application/json")

    # -- admin API (not Kubernetes) ---------------------------------------------------------------

    async def _admin(self, request: Request, path: str) -> Response:
        store, method = self.store, request.method
        action = path.removeprefix("/_fake/")
        body = await self._body(request) if method == "POST" else {}
        if action == "stats" and method == "GET":
            requests: dict[str, dict[str, int]] = {}
            for (verb, plural), n in sorted(store.requests.items()):
                requests.setdefault(verb, {})[plural] = n
            return _json(
                {
                    "requests": requests,
                    "openWatches": {p: len(t.watches) for p, t in store.tables.items()},
                    "objects": {p: len(t.objects) for p, t in store.tables.items()},
                    "resourceVersion": str(store.rv),
                    "compactedResourceVersion": {p: str(t.compacted_rv) for p, t in store.tables.items()},
                }
            )
        if action == "stats" and method == "DELETE":
            store.requests.clear()
            return _json({})
        if action == "compact" and method == "POST":
            return _json({"compactedResourceVersion": str(store.compact())})
        if action == "break-watches" and method == "POST":
            return _json({"closed": store.break_watches(request.query_params.get("resource"))})
        if action == "latency" and method == "POST":
            seconds, match, commit = float(body.get("seconds", 0)), str(body.get("match", "")), body.get("commit", True)
            if not match:
                self.latency = seconds
            elif seconds:
                self.delays[match] = (seconds, bool(commit))
            else:
                self.delays.pop(match, None)
            return _json({"seconds": seconds, "match": match, "commit": commit})
        if action == "faults" and method == "POST":
            self.faults.append(
                Fault(
                    int(body["code"]),
                    body.get("count", 1),
                    body.get("match", ""),
                    body.get("message", "injected fault"),
                )
            )
            return _json({"faults": len(self.faults)})
        if action == "faults" and method == "DELETE":
            self.faults.clear()
            return _json({})
        if action == "token" and method == "POST":  # rotate the bearer token API requests need
            self.config.token = str(body["token"])
            return _json({})
        if action == "podgroups" and method == "POST":  # install / remove the CRD
            enabled = bool(body.get("enabled", True))
            if not enabled and self.config.podgroups:
                store.break_watches(PODGROUPS.plural)
                store.tables[PODGROUPS.plural].objects.clear()  # removing a CRD removes its objects
            self.config.podgroups = enabled
            return _json({"enabled": enabled})
        return _json(errors.status_body(404, f"no admin endpoint {method} {path}", "NotFound"), 404)


def create_app(config: FakeConfig | None = None) -> Starlette:
    server = FakeApiServer(config or FakeConfig())
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app = Starlette(routes=[Route("/{path:path}", server.handle, methods=methods)])
    app.state.fake = server
    return app
