"""Malformed or hostile requests get a 4xx that says what is wrong, and the server stays up."""

from __future__ import annotations

import httpx
import pytest

from tests.plugins.servers import ServerProcess

VERBS = ["/filter", "/prioritize", "/preempt", "/bind", "/v1/explain"]


@pytest.mark.parametrize("path", VERBS)
def test_not_json_is_400_with_message(http: httpx.Client, path: str) -> None:
    r = http.post(path, content=b"not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["detail"]


def test_not_json_without_content_type(http: httpx.Client) -> None:
    # curl -d sends application/x-www-form-urlencoded; it must still be a clear 4xx.
    r = http.post("/filter", content=b"not json", headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["detail"]
    # ...and a JSON body sent as a form (curl -d '{...}') is read as the JSON it is.
    r = http.post("/filter", content=b'{"Pod": {}, "NodeNames": []}', headers={"content-type": "text/plain"})
    assert r.status_code == 200


@pytest.mark.parametrize("path", VERBS)
def test_empty_body_is_400(http: httpx.Client, path: str) -> None:
    r = http.post(path, content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "empty" in r.json()["detail"]


def test_wrong_shape_names_the_field(http: httpx.Client) -> None:
    r = http.post("/filter", json={"NodeNames": ["a"]})
    assert r.status_code == 422
    assert "Pod" in r.json()["detail"]
    r = http.post("/bind", json={"PodName": "p", "PodNamespace": "default", "PodUID": "u"})
    assert r.status_code == 422
    assert "Node" in r.json()["detail"]
    r = http.post("/filter", json=[1, 2, 3])
    assert r.status_code == 422


def test_wrong_types_inside_pod(http: httpx.Client) -> None:
    r = http.post("/filter", json={"Pod": {"metadata": {"labels": {"a": ["x"]}}}, "NodeNames": []})
    assert r.status_code == 422
    assert "labels" in r.json()["detail"]


def test_bad_quantity_is_422_naming_it(http: httpx.Client) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "d", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
    }
    r = http.post("/filter", json={"Pod": pod, "NodeNames": ["n"]})
    assert r.status_code == 422
    assert "lots" in r.json()["detail"]


def test_body_over_limit_is_413(http: httpx.Client) -> None:
    big = b'{"Pod": {}, "NodeNames": ["' + b"x" * (20 * 1024 * 1024) + b'"]}'
    r = http.post("/filter", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "limit" in r.json()["detail"]


def test_chunked_body_over_limit_is_413(http: httpx.Client) -> None:
    def chunks() -> object:
        yield b'{"Pod": {}, "NodeNames": ["'
        for _ in range(10):
            yield b"y" * (1024 * 1024)
        yield b'"]}'

    r = http.post("/filter", content=chunks(), headers={"content-type": "application/json"})  # type: ignore[arg-type]
    assert r.status_code == 413


def test_deeply_nested_json_is_4xx(http: httpx.Client, server: ServerProcess) -> None:
    r = http.post("/filter", content=b"[" * 200_000, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500
    assert http.get("/healthz").status_code == 200


def test_server_survives_and_counts_errors(http: httpx.Client) -> None:
    http.post("/filter", content=b"nope", headers={"content-type": "application/json"})
    text = http.get("/metrics").text
    assert 'extender_errors_total{kind="bad_request",verb="filter"}' in text
    assert 'extender_requests_total{code="400",verb="filter"}' in text
    assert "extender_request_duration_seconds_bucket" in text


def _pod(spec: object) -> dict[str, object]:
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": spec}


HOSTILE = {
    "containers-string": _pod({"containers": "x"}),
    "requests-list": _pod({"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]}),
    "quantity-bool": _pod({"containers": [{"name": "c", "resources": {"requests": {"cpu": True}}}]}),
    "selector-number": _pod({"nodeSelector": {"disk": 1}}),
    "affinity-string": _pod({"affinity": {"nodeAffinity": "x"}}),
    "expression-values-dict": _pod(
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": {"x": 1}}]}}
                    ]
                }
            }
        }
    ),
    "toleration-key-list": _pod({"tolerations": [{"key": ["a"], "operator": "Exists"}]}),
    "spread-skew-string": _pod({"topologySpreadConstraints": [{"maxSkew": "one", "topologyKey": "zone"}]}),
    "host-port-out-of-range": _pod({"containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 70000}]}]}),
    "volume-source-string": _pod({"volumes": [{"name": "v", "gcePersistentDisk": "disk"}]}),
    "image-number": _pod({"containers": [{"name": "c", "image": 5}]}),
    "owner-references-dict": {"metadata": {"name": "p", "ownerReferences": {"kind": "x"}}},
    "owner-api-version-number": {"metadata": {"name": "p", "ownerReferences": [{"apiVersion": 1, "kind": "x"}]}},
}


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/v1/explain"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_pod_shapes_are_422_naming_the_field(http: httpx.Client, path: str, case: str) -> None:
    r = http.post(path, json={"Pod": HOSTILE[case], "NodeNames": ["n"]})
    assert r.status_code == 422, r.text
    assert "Pod" in r.json()["detail"]


def test_hostile_node_objects_are_422(http: httpx.Client) -> None:
    node = {"metadata": {"name": "n"}, "spec": {"taints": "all"}, "status": {"allocatable": {"cpu": "4"}}}
    r = http.post("/filter", json={"Pod": _pod({}), "Nodes": {"items": [node]}})
    assert r.status_code == 422
    assert "taints" in r.json()["detail"]
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}}
    r = http.post("/filter", json={"Pod": _pod({}), "Nodes": {"items": [node]}})
    assert r.status_code == 422
    assert "lots" in r.json()["detail"]


def test_out_of_range_numbers_are_422_or_echoed(http: httpx.Client) -> None:
    r = http.post("/filter", json={"Pod": _pod({"priority": 2**70}), "NodeNames": ["n"]})
    assert r.status_code == 422 and "priority" in r.json()["detail"]
    r = http.post(
        "/filter",
        json={
            "Pod": _pod({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e30"}}}]}),
            "NodeNames": ["n"],
        },
    )
    assert r.status_code == 422 and "out of range" in r.json()["detail"]
    # A node object with an unknown huge number is still echoed exactly (orjson cannot, json can).
    node = {
        "metadata": {"name": "big-0", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4", "pods": "10"}},
        "x": 2**80,
    }
    r = http.post("/filter", json={"Pod": _pod({}), "Nodes": {"items": [node]}})
    assert r.status_code == 200
    assert r.json()["Nodes"]["items"] == [node]
