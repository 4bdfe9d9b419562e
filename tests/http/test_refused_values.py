"""Values the API server would refuse (absurd quantities, giant exponents, selectors with unknown
operators or the wrong number of values) are answered at once with a 422 naming them, never evaluated;
a valid selector whose value kube-scheduler cannot read matches nothing, as there."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.http.bodies import pod_of


def _with_requests(requests: dict[str, object], part: str = "requests") -> dict[str, object]:
    return pod_of({"containers": [{"name": "c", "resources": {part: requests}}]})


def _node_affinity(expression: dict[str, object], field: str = "matchExpressions") -> dict[str, object]:
    term = {field: [expression]}
    return pod_of(
        {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
            }
        }
    )


def _pod_affinity(expression: dict[str, object], kind: str = "podAffinity") -> dict[str, object]:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [expression]}}
    return pod_of({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}})


ABSURD_QUANTITIES = {
    "cpu-1e308": (_with_requests({"cpu": "1e308"}), "out of range"),
    "memory-20-digits-Ei": (_with_requests({"memory": "99999999999999999999Ei"}), "out of range"),
    "cpu-number-1e308": (_with_requests({"cpu": 1e308}), "out of range"),
    "cpu-negative": (_with_requests({"cpu": "-1"}), "negative"),
    "memory-negative": (_with_requests({"memory": "-5Gi"}), "negative"),
    "extended-negative": (_with_requests({"example.com/gpu": "-3"}), "negative"),
    "limit-negative": (_with_requests({"cpu": "-100m"}, "limits"), "negative"),
    "overhead-negative": (pod_of({"overhead": {"memory": "-1Mi"}}), "negative"),
    "limit-not-a-quantity": (_with_requests({"cpu": "lots"}, "limits"), "lots"),
    "nan": (_with_requests({"cpu": "NaN"}), "NaN"),
    "too-long": (_with_requests({"cpu": "1" * 5000}), "too long"),
}


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/preempt", "/v1/explain"])
@pytest.mark.parametrize("case", sorted(ABSURD_QUANTITIES))
def test_absurd_quantities_are_422_naming_the_quantity(http: httpx.Client, path: str, case: str) -> None:
    pod, words = ABSURD_QUANTITIES[case]
    body: dict[str, object] = {"Pod": pod, "NodeNames": ["n"]}
    if path == "/preempt":
        body = {"Pod": pod, "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": "x"}]}}}
    r = http.post(path, json=body)
    assert r.status_code == 422, r.text
    assert words in r.json()["detail"]


@pytest.mark.parametrize("quantity", ["1e99999999", "1e-99999999", "-1e99999999", "9e" + "9" * 60])
def test_a_giant_exponent_is_answered_at_once(http: httpx.Client, quantity: str) -> None:
    """The quantity parser must not compute 10**99999999: the event loop would stall for minutes."""
    started = time.monotonic()
    r = http.post("/filter", json={"Pod": _with_requests({"cpu": quantity}), "NodeNames": ["n"]}, timeout=10)
    assert time.monotonic() - started < 5.0
    if quantity == "1e-99999999":  # a tiny request rounds up to one millicore, as in Kubernetes
        assert r.status_code == 200 and r.json()["Error"] == ""
    else:
        assert r.status_code == 422, r.text
    assert http.get("/healthz", timeout=2).status_code == 200


INVALID_SELECTORS = {
    "node-affinity-unknown-operator": _node_affinity({"key": "k", "operator": "Near", "values": ["x"]}),
    "node-affinity-in-without-values": _node_affinity({"key": "k", "operator": "In"}),
    "node-affinity-exists-with-values": _node_affinity({"key": "k", "operator": "Exists", "values": ["x"]}),
    "node-affinity-gt-two-values": _node_affinity({"key": "k", "operator": "Gt", "values": ["1", "2"]}),
    "match-fields-unknown-key": _node_affinity(
        {"key": "metadata.uid", "operator": "In", "values": ["x"]}, "matchFields"
    ),
    "match-fields-two-values": _node_affinity(
        {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}, "matchFields"
    ),
    "match-fields-exists": _node_affinity({"key": "metadata.name", "operator": "Exists"}, "matchFields"),
    "pod-affinity-unknown-operator": _pod_affinity({"key": "app", "operator": "Near", "values": ["x"]}),
    "pod-affinity-gt": _pod_affinity({"key": "app", "operator": "Gt", "values": ["1"]}),
    "anti-affinity-notin-without-values": _pod_affinity({"key": "app", "operator": "NotIn"}, "podAntiAffinity"),
    "spread-selector-unknown-operator": pod_of(
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]},
                }
            ]
        }
    ),
    "toleration-unknown-operator": pod_of({"tolerations": [{"key": "a", "operator": "Near", "effect": "NoSchedule"}]}),
    "toleration-exists-with-value": pod_of({"tolerations": [{"key": "a", "operator": "Exists", "value": "v"}]}),
    "toleration-without-key-not-exists": pod_of({"tolerations": [{"operator": "Equal", "value": "v"}]}),
}


@pytest.mark.parametrize("path", ["/filter", "/prioritize", "/v1/explain"])
@pytest.mark.parametrize("case", sorted(INVALID_SELECTORS))
def test_selectors_the_api_server_refuses_are_422_naming_the_field(http: httpx.Client, path: str, case: str) -> None:
    r = http.post(path, json={"Pod": INVALID_SELECTORS[case], "NodeNames": ["n"]})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "Pod.spec." in detail and ("affinity" in detail or "tolerations" in detail or "topology" in detail)


def test_a_valid_gt_with_a_non_integer_value_matches_nothing_as_in_kube_scheduler(http: httpx.Client) -> None:
    """The API server checks only that Gt has one value; kube-scheduler then matches no node. So do we."""
    node = {"metadata": {"name": "gt-n1", "labels": {"k": "5"}}, "status": {"allocatable": {"cpu": "4", "pods": "9"}}}
    pod = _node_affinity({"key": "k", "operator": "Gt", "values": ["three"]})
    r = http.post("/filter", json={"Pod": pod, "Nodes": {"items": [node]}})
    assert r.status_code == 200 and r.json()["Nodes"]["items"] == []
    assert "gt-n1" in r.json()["FailedAndUnresolvableNodes"]
