"""Malformed or hostile requests get a 4xx that says what is wrong, and the server stays up."""

from __future__ import annotations

import httpx
import pytest

from tests.http.bodies import pod_of
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
def test_a_lone_surrogate_escape_is_not_json(http: httpx.Client, path: str) -> None:
    """The body is parsed straight into its model by pydantic's parser, which refuses what is not
    Unicode instead of passing a string no JSON encoder can write back."""
    body = b'{"Pod": {"metadata": {"name": "p", "labels": {"app": "\\ud800"}}}, "NodeNames": []}'
    r = http.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["detail"]


def test_integers_past_64_bits_stay_exact(http: httpx.Client) -> None:
    """Read exactly, an out-of-range priority is reported as such (not rounded through a float)."""
    body = b'{"Pod": {"metadata": {"name": "p"}, "spec": {"priority": 18446744073709551617}}, "NodeNames": []}'
    r = http.post("/filter", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert "Pod.spec.priority" in r.json()["detail"]


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


def test_wrong_types_insidepod_of(http: httpx.Client) -> None:
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


HOSTILE = {
    "containers-string": pod_of({"containers": "x"}),
    "requests-list": pod_of({"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]}),
    "quantity-bool": pod_of({"containers": [{"name": "c", "resources": {"requests": {"cpu": True}}}]}),
    "selector-number": pod_of({"nodeSelector": {"disk": 1}}),
    "affinity-string": pod_of({"affinity": {"nodeAffinity": "x"}}),
    "expression-values-dict": pod_of(
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
    "toleration-key-list": pod_of({"tolerations": [{"key": ["a"], "operator": "Exists"}]}),
    "spread-skew-string": pod_of({"topologySpreadConstraints": [{"maxSkew": "one", "topologyKey": "zone"}]}),
    "host-port-out-of-range": pod_of(
        {"containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 70000}]}]}
    ),
    "volume-source-string": pod_of({"volumes": [{"name": "v", "gcePersistentDisk": "disk"}]}),
    "image-number": pod_of({"containers": [{"name": "c", "image": 5}]}),
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
    r = http.post("/filter", json={"Pod": pod_of({}), "Nodes": {"items": [node]}})
    assert r.status_code == 422
    assert "taints" in r.json()["detail"]
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}}
    r = http.post("/filter", json={"Pod": pod_of({}), "Nodes": {"items": [node]}})
    assert r.status_code == 422
    assert "lots" in r.json()["detail"]


def test_out_of_range_numbers_are_422_or_echoed(http: httpx.Client) -> None:
    r = http.post("/filter", json={"Pod": pod_of({"priority": 2**70}), "NodeNames": ["n"]})
    assert r.status_code == 422 and "priority" in r.json()["detail"]
    r = http.post(
        "/filter",
        json={
            "Pod": pod_of({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e30"}}}]}),
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
    r = http.post("/filter", json={"Pod": pod_of({}), "Nodes": {"items": [node]}})
    assert r.status_code == 200
    assert r.json()["Nodes"]["items"] == [node]


_HUGE_SELECTOR = {"matchLabels": {"app": "big"}, "unknownField": 2**80}
_HUGE_TERM = {"topologyKey": "kubernetes.io/hostname", "labelSelector": _HUGE_SELECTOR, "unknownField": 2**80}
HUGE_INTEGERS = {
    "volume-source": {"volumes": [{"name": "d", "gcePersistentDisk": {"pdName": "x", "size": 2**80}}]},
    "spread-selector": {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": _HUGE_SELECTOR,
            }
        ]
    },
    "anti-affinity-term": {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_HUGE_TERM]}}
    },
    "namespace-selector": {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "podAffinityTerm": {**_HUGE_TERM, "namespaceSelector": _HUGE_SELECTOR}}
                ]
            }
        }
    },
}


@pytest.mark.parametrize("case", HUGE_INTEGERS)
def test_a_huge_integer_in_a_free_form_or_unknown_pod_field_is_answered(http: httpx.Client, case: str) -> None:
    """Fields the API keeps free-form (a volume's source), and unknown ones we keep, may hold an
    integer past 64 bits: no reason to fail the request or the pod (keys and digests of such
    values are encoded without orjson)."""
    names = ["huge-0", "huge-1"]
    nodes = [
        {
            "metadata": {"name": n, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": n}},
            "status": {"allocatable": {"cpu": "4", "pods": "10"}},
        }
        for n in names
    ]
    assert http.post("/filter", json={"Pod": pod_of({}), "Nodes": {"items": nodes}}).status_code == 200
    pod = {
        **pod_of(HUGE_INTEGERS[case]),
        "metadata": {"name": "p", "namespace": "d", "uid": "u", "labels": {"app": "big"}},
    }
    for _ in range(3):  # the class is admitted, then stored, then reused
        r = http.post("/filter", json={"Pod": pod, "NodeNames": names})
        assert r.status_code == 200 and r.json()["Error"] == "" and r.json()["NodeNames"] == names, r.text
        r = http.post("/prioritize", json={"Pod": pod, "NodeNames": names})
        assert r.status_code == 200 and [e["Host"] for e in r.json()] == names, r.text


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/v1/explain"])
def test_duplicate_node_names_are_422_naming_them(http: httpx.Client, path: str) -> None:
    r = http.post(path, json={"Pod": pod_of({}), "NodeNames": ["dup-a", "dup-b", "dup-a"]})
    assert r.status_code == 422, r.text
    assert "more than once" in r.json()["detail"] and "dup-a" in r.json()["detail"]
    if path != "/v1/explain":
        items = [{"metadata": {"name": "dup-n"}}, {"metadata": {"name": "dup-n"}}]
        r = http.post(path, json={"Pod": pod_of({}), "Nodes": {"items": items}})
        assert r.status_code == 422 and "dup-n" in r.json()["detail"]


def test_unknown_node_names_fail_each_with_a_reason(http: httpx.Client) -> None:
    """A node the extender has not seen yet is not an error of the whole call: that node fails, with why."""
    names = ["ghost-1", "", "\u0000odd\u2603", "x" * 10_000]
    r = http.post("/filter", json={"Pod": pod_of({}), "NodeNames": names})
    assert r.status_code == 200 and r.json()["Error"] == ""
    assert r.json()["NodeNames"] == []
    assert set(r.json()["FailedAndUnresolvableNodes"]) == set(names)
    assert all("not found" in reason for reason in r.json()["FailedAndUnresolvableNodes"].values())
    r = http.post("/prioritize", json={"Pod": pod_of({}), "NodeNames": names})
    assert r.status_code == 200 and r.json() == [{"Host": n, "Score": 0} for n in names]


def test_huge_arrays_and_strings_are_answered(http: httpx.Client) -> None:
    many = [f"many-{i}" for i in range(100_000)]
    r = http.post("/filter", json={"Pod": pod_of({}), "NodeNames": many}, timeout=60)
    assert r.status_code == 200 and len(r.json()["FailedAndUnresolvableNodes"]) == len(many)
    big_label = pod_of({})
    big_label["metadata"] = {"name": "p", "labels": {"k": "v" * 1_000_000}}
    r = http.post("/filter", json={"Pod": big_label, "NodeNames": ["n"]}, timeout=60)
    assert r.status_code == 200 and r.json()["Error"] == ""
    victims = {"n": {"Pods": [{"UID": f"u{i}"} for i in range(50_000)]}}
    r = http.post("/preempt", json={"Pod": pod_of({}), "NodeNameToMetaVictims": victims}, timeout=60)
    assert r.status_code == 200 and r.json() == {"NodeNameToMetaVictims": {}}
    r = http.post("/bind", json={"PodName": "p" * 100_000, "PodNamespace": "d", "PodUID": "u", "Node": "n"})
    assert r.status_code == 200 and r.json()["Error"]


def test_deep_nesting_inside_an_object_is_4xx(http: httpx.Client) -> None:
    deep = (
        b'{"Pod": {"metadata": {"name": "p", "x": '
        + b'{"a":' * 100_000
        + b"1"
        + b"}" * 100_000
        + b'}}, "NodeNames": []}'
    )
    r = http.post("/filter", content=deep, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["detail"]
    deep_list = b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "n"}, "x": ' + b"[" * 100_000
    deep_list += b"]" * 100_000 + b"}]}}"
    r = http.post("/filter", content=deep_list, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["detail"]
    assert http.get("/healthz").status_code == 200


@pytest.mark.parametrize("field", ["PodName", "PodNamespace", "PodUID", "Node"])
def test_bind_with_an_empty_field_is_422_naming_it(http: httpx.Client, field: str) -> None:
    body = {"PodName": "p", "PodNamespace": "d", "PodUID": "u", "Node": "n", field: ""}
    r = http.post("/bind", json=body)
    assert r.status_code == 422 and field in r.json()["detail"]
