"""Filter, prioritize and bind answered in front of FastAPI (app.middleware.hot_verbs) answer as the routed app does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.main import create_app
from app.middleware.hot_verbs import ExtenderApp
from app.settings import Settings
from app.wire import ExtenderArgs, ExtenderBindingArgs

POD = {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}}
BAD_QUANTITY = {
    "metadata": {"name": "p", "namespace": "d", "uid": "u"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
}
# (path, body bytes): valid calls, then each way a body can be refused.
CALLS = [
    ("/filter", {"Pod": POD, "NodeNames": ["a", "b"]}),
    ("/prioritize", {"Pod": POD, "NodeNames": ["a", "b"]}),
    ("/filter", {"Pod": POD, "Nodes": {"items": [{"metadata": {"name": "n1"}}]}}),
    ("/prioritize", {"Pod": POD}),
    ("/filter", b"{not json"),
    ("/prioritize", b""),
    ("/filter", {"Pod": {"metadata": {"name": 5}}}),
    ("/filter", {"Pod": BAD_QUANTITY, "NodeNames": ["a"]}),
    ("/prioritize", {"Pod": BAD_QUANTITY, "NodeNames": ["a"]}),
    ("/bind", {"PodName": "p", "PodNamespace": "d", "PodUID": "u", "Node": "n1"}),
    ("/bind", {"PodName": "p", "PodNamespace": "d", "PodUID": "u"}),
    ("/bind", {"PodName": "", "PodNamespace": "d", "PodUID": "u", "Node": "n1"}),
    ("/bind", b"[]"),
]


def _app(redis_url: str, prefix: str, hot: bool) -> FastAPI:
    app = create_app(Settings(redis_url=redis_url, redis_prefix=prefix, kube_mode="off"))
    assert isinstance(app, ExtenderApp) and app.hot_verbs is not None
    if not hot:
        app.hot_verbs = None
    return app


@pytest.fixture
def clients(redis_url: str, redis_prefix: str) -> Iterator[tuple[TestClient, TestClient]]:
    with (
        TestClient(_app(redis_url, redis_prefix, hot=True)) as hot,
        TestClient(_app(redis_url, redis_prefix, hot=False)) as routed,
    ):
        yield hot, routed


def _validates(path: str, body: Any) -> bool:
    model = ExtenderBindingArgs if path == "/bind" else ExtenderArgs
    try:
        model.model_validate_json(body if isinstance(body, bytes) else orjson.dumps(body))
    except ValidationError:
        return False
    return True


def _post(client: TestClient, path: str, body: Any) -> Any:
    if isinstance(body, bytes):
        return client.post(path, content=body, headers={"content-type": "application/json"})
    return client.post(path, json=body)


def test_the_cycle_verbs_skip_the_router_and_answer_as_it_does(
    clients: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    hot, routed = clients
    handled: list[str] = []
    handle = APIRoute.handle

    async def counted(self: APIRoute, scope: Any, receive: Any, send: Any) -> None:
        handled.append(self.path)
        await handle(self, scope, receive, send)

    monkeypatch.setattr(APIRoute, "handle", counted)
    for path, body in CALLS:
        handled.clear()
        expected = _post(routed, path, body)
        assert handled == [path]
        handled.clear()
        answer = _post(hot, path, body)
        assert (answer.status_code, answer.json()) == (expected.status_code, expected.json()), (path, body)
        assert answer.headers["content-type"] == expected.headers["content-type"] == "application/json"
        assert int(answer.headers["content-length"]) == len(answer.content)
        assert "server-timing" in answer.headers  # timed as the metrics middleware times
        # A body that does not validate takes the app's way; one the service refuses (a bad quantity,
        # read where the pod becomes a PodInfo) gets the app's own handler below the router.
        assert handled == ([] if _validates(path, body) else [path]), (path, expected.text)
    assert any(expected.status_code == 200 for expected in [_post(routed, p, b) for p, b in CALLS[:2]])
    metrics = hot.get("/metrics").text
    assert 'extender_requests_total{code="200",verb="filter"}' in metrics
    assert 'extender_requests_total{code="422",verb="filter"}' in metrics
    # bind answered in front of the app counts as the routes count it: a 200, and its Error field as
    # a domain error (no API server here), once each.
    assert 'extender_requests_total{code="200",verb="bind"} 1.0' in metrics
    assert 'extender_errors_total{kind="domain",verb="bind"} 1.0' in metrics


def test_a_body_over_the_limit_is_refused_before_the_hot_path_reads_it(redis_url: str, redis_prefix: str) -> None:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off", max_body_bytes=2048)
    with TestClient(create_app(settings)) as client:
        body = {"Pod": POD, "NodeNames": [f"node-{i}" for i in range(400)]}
        assert client.post("/filter", json=body).status_code == 413
        assert client.post("/filter", json={"Pod": POD, "NodeNames": ["a"]}).status_code == 200


def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(redis_url: str, redis_prefix: str) -> None:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off", max_body_bytes=2048)
    whole = orjson.dumps({"Pod": POD, "NodeNames": [f"node-{i}" for i in range(400)]})

    def chunks(body: bytes) -> Iterator[bytes]:  # no Content-Length: sent chunked
        for start in range(0, len(body), 512):
            yield body[start : start + 512]

    with TestClient(create_app(settings)) as client:
        for path in ("/filter", "/prioritize", "/bind"):
            answer = client.post(path, content=chunks(whole), headers={"content-type": "application/json"})
            assert answer.status_code == 413 and "EXTENDER_MAX_BODY_BYTES" in answer.json()["detail"], path
        small = orjson.dumps({"Pod": POD, "NodeNames": ["a"]})
        answer = client.post("/filter", content=chunks(small), headers={"content-type": "application/json"})
        assert answer.status_code == 200 and answer.json()["Error"] == ""
