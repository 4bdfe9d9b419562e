"""Hand-written cases for each verb in both node forms, against a real replica."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from extenders.scheduling import CYCLE_SNAPSHOT_SECONDS


def node(name: str, cpu: str = "4", memory: str = "8Gi", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "10",
            "labels": {"kubernetes.io/hostname": name, **labels},
            "annotations": {"note": "kept verbatim"},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "someFutureField": {"x": 1},
        },
    }


def pod(name: str, cpu: str = "500m", memory: str = "256Mi", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": str(uuid.uuid4())},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def _names(tag: str, count: int) -> list[str]:
    return [f"{tag}-{i}" for i in range(count)]


def test_filter_nodes_form_echoes_objects_and_fails_what_does_not_fit(http: httpx.Client) -> None:
    nodes = [node(n) for n in _names("fa", 2)] + [node("fa-small", cpu="100m")]
    r = http.post("/filter", json={"Pod": pod("p1"), "Nodes": {"items": nodes}, "NodeNames": None})
    assert r.status_code == 200
    body = r.json()
    assert body["NodeNames"] is None
    assert body["Nodes"]["items"] == nodes[:2]
    # A request above the node's whole allocatable cannot be fixed by preemption (today's NodeResourcesFit).
    assert body["FailedAndUnresolvableNodes"] == {"fa-small": "Insufficient cpu"}
    assert body["FailedNodes"] == {}
    assert body["Error"] == ""


def test_filter_names_form_uses_the_snapshot(http: httpx.Client) -> None:
    nodes = [node(n, disk="ssd" if n.endswith("0") else "hdd") for n in _names("fb", 3)]
    # The full-node form teaches the snapshot these nodes; the names form then finds them.
    http.post("/filter", json={"Pod": pod("seed"), "Nodes": {"items": nodes}})
    names = [*_names("fb", 3), "fb-unknown"]
    r = http.post("/filter", json={"Pod": pod("p2", nodeSelector={"disk": "ssd"}), "NodeNames": names})
    body = r.json()
    assert body["Nodes"] is None
    assert body["NodeNames"] == ["fb-0"]
    assert set(body["FailedAndUnresolvableNodes"]) == {"fb-1", "fb-2", "fb-unknown"}
    assert "node affinity/selector" in body["FailedAndUnresolvableNodes"]["fb-1"]
    assert "not found" in body["FailedAndUnresolvableNodes"]["fb-unknown"]


def test_prioritize_both_forms(http: httpx.Client) -> None:
    nodes = [node("pa-big", cpu="16", memory="32Gi"), node("pa-small", cpu="2", memory="4Gi")]
    r = http.post("/prioritize", json={"Pod": pod("p3"), "Nodes": {"items": nodes}})
    assert r.status_code == 200
    scores = {e["Host"]: e["Score"] for e in r.json()}
    assert set(scores) == {"pa-big", "pa-small"}
    assert all(0 <= s <= 10 for s in scores.values())
    # Least-requested spreading prefers the emptier, larger node.
    assert scores["pa-big"] > scores["pa-small"]
    r = http.post("/prioritize", json={"Pod": pod("p3"), "NodeNames": ["pa-big", "pa-small"]})
    assert {e["Host"]: e["Score"] for e in r.json()} == scores


def test_preempt_both_forms_answer_meta_victims(http: httpx.Client) -> None:
    preemptor = pod("hi", priority=1000)
    victim = pod("lo", nodeName="pr-0", priority=1)
    r = http.post(
        "/preempt",
        json={"Pod": preemptor, "NodeNameToVictims": {"pr-0": {"Pods": [victim], "NumPDBViolations": 0}}},
    )
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"NodeNameToMetaVictims"}
    for victims in body["NodeNameToMetaVictims"].values():
        assert victims["Pods"] and all(set(p) == {"UID"} for p in victims["Pods"])
    r = http.post(
        "/preempt",
        json={"Pod": preemptor, "NodeNameToMetaVictims": {"pr-0": {"Pods": [{"UID": "abc"}], "NumPDBViolations": 1}}},
    )
    assert r.status_code == 200
    assert set(r.json()) == {"NodeNameToMetaVictims"}


def test_bind_without_api_server_is_an_error_field(http: httpx.Client) -> None:
    r = http.post("/bind", json={"PodName": "p", "PodNamespace": "d", "PodUID": "u", "Node": "n"})
    assert r.status_code == 200
    assert r.json()["Error"]


def test_unknown_fields_are_ignored(http: httpx.Client) -> None:
    r = http.post("/filter", json={"Pod": pod("p4"), "NodeNames": [], "SomethingNew": {"a": 1}})
    assert r.status_code == 200
    assert r.json()["NodeNames"] == []


def test_explain_reports_every_predicate(http: httpx.Client) -> None:
    nodes = [node("ex-0"), node("ex-1", cpu="100m")]
    http.post("/filter", json={"Pod": pod("seed"), "Nodes": {"items": nodes}})
    r = http.post("/v1/explain", json={"Pod": pod("p5"), "NodeNames": ["ex-0", "ex-1"]})
    assert r.status_code == 200
    out = r.json()["nodes"]
    assert out["ex-0"]["fit"] is True
    assert out["ex-1"]["fit"] is False
    verdict = out["ex-1"]["predicates"]["PodFitsResources"]
    assert (verdict["fit"], verdict["reason"]) == (False, "Insufficient cpu")
    assert out["ex-0"]["predicates"]["PodFitsResources"]["fit"] is True


def test_health_and_readiness(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    r = http.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json()["ready"] is True


def test_full_node_objects_refresh_the_snapshot_only_when_they_changed(http: httpx.Client) -> None:
    original = node("nr-0", disk="hdd")
    http.post("/filter", json={"Pod": pod("seed"), "Nodes": {"items": [original]}})
    before = http.get("/v1/nodes").json()["generation"]

    heartbeat = {**original, "metadata": {**original["metadata"], "resourceVersion": "11"}}
    http.post("/filter", json={"Pod": pod("again"), "Nodes": {"items": [heartbeat]}})
    assert http.get("/v1/nodes").json()["generation"] == before, "a heartbeat must not bump the generation"

    relabelled = {**original, "metadata": {**original["metadata"], "resourceVersion": "12", "labels": {"disk": "ssd"}}}
    http.post("/filter", json={"Pod": pod("third"), "Nodes": {"items": [relabelled]}})
    assert http.get("/v1/nodes/nr-0").json()["labels"] == {"disk": "ssd"}

    stale = {**original, "metadata": {**original["metadata"], "resourceVersion": "3", "labels": {"disk": "tape"}}}
    http.post("/filter", json={"Pod": pod("fourth"), "Nodes": {"items": [stale]}})
    assert http.get("/v1/nodes/nr-0").json()["labels"] == {"disk": "ssd"}, "an older object must not win"


def test_many_new_nodes_in_one_request_are_all_stored(http: httpx.Client) -> None:
    # More changed nodes than the Redis pool has connections (64): none may fail the request.
    nodes = [node(f"bulk-{i}") for i in range(300)]
    r = http.post("/filter", json={"Pod": pod("bulk"), "Nodes": {"items": nodes}})
    assert r.status_code == 200
    assert r.json()["Error"] == ""
    assert len(r.json()["Nodes"]["items"]) == 300
    stored = {n["name"] for n in http.get("/v1/nodes").json()["nodes"]}
    assert {f"bulk-{i}" for i in range(300)} <= stored


def test_pods_of_one_class_reuse_verdicts_and_the_stats_say_so(http: httpx.Client) -> None:
    nodes = [node("eq-0"), node("eq-1", cpu="100m"), node("eq-2", disk="ssd")]
    names = ["eq-0", "eq-1", "eq-2"]
    seed = http.post("/filter", json={"Pod": pod("eq-seed", cpu="3"), "Nodes": {"items": nodes}})
    assert seed.status_code == 200
    before = http.get("/v1/cache/stats").json()
    assert before["enabled"] is True
    first = http.post("/filter", json={"Pod": pod("eq-a", cpu="3"), "NodeNames": names}).json()
    second = http.post("/filter", json={"Pod": pod("eq-b", cpu="3"), "NodeNames": names}).json()
    # another pod of the same shape: the same answer, every node's verdict reused
    for key in ("NodeNames", "FailedNodes", "FailedAndUnresolvableNodes"):
        assert second[key] == first[key], key
    assert first["FailedAndUnresolvableNodes"]["eq-1"] == "Insufficient cpu"
    after = http.get("/v1/cache/stats").json()
    delta = {k: after["verbs"]["filter"][k] - before["verbs"]["filter"][k] for k in after["verbs"]["filter"]}
    assert delta["hits"] >= 1 and delta["nodes_reused"] >= len(names)
    metrics = http.get("/metrics").text
    assert 'extender_equivalence_cache_requests_total{result="hit",verb="filter"}' in metrics


def test_pods_of_one_class_reuse_raw_scores_and_the_stats_say_so(http: httpx.Client) -> None:
    # Sizes far enough apart that the averaged, rounded scores differ under every release's
    # BalancedAllocation (1.36's scores the change the pod makes, in a range half as wide).
    nodes = [node("eqp-0", cpu="2"), node("eqp-1", cpu="8"), node("eqp-2", cpu="32")]
    names = ["eqp-0", "eqp-1", "eqp-2"]
    assert http.post("/filter", json={"Pod": pod("eqp-seed", cpu="1"), "Nodes": {"items": nodes}}).status_code == 200
    before = http.get("/v1/cache/stats").json()["verbs"]["prioritize"]
    answers = [
        http.post("/prioritize", json={"Pod": pod(f"eqp-{i}", cpu="1"), "NodeNames": names}).json() for i in range(3)
    ]
    assert answers[0] == answers[1] == answers[2]
    assert [a["Score"] for a in answers[0]] != [answers[0][0]["Score"]] * 3  # the sizes tell the nodes apart
    after = http.get("/v1/cache/stats").json()["verbs"]["prioritize"]
    delta = {k: after[k] - before[k] for k in after}
    # the first call admits the class, the second stores, the third reuses every node's raw scores
    assert delta["hits"] >= 1 and delta["nodes_reused"] >= len(names), delta
    assert 'extender_equivalence_cache_requests_total{result="hit",verb="prioritize"}' in http.get("/metrics").text


def _metric(http: httpx.Client, series: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {series} in /metrics")


def _catch_ups(http: httpx.Client) -> float:
    """How many times the replica has asked Redis what changed (the catch-up script); a scrape catches
    up once itself (the gang gauges read the snapshot), so each reading adds one to the next."""
    return _metric(http, 'extender_redis_command_duration_seconds_count{command="catchup"}')


def test_prioritize_in_the_cycle_of_its_filter_reads_the_snapshot_the_filter_read(http: httpx.Client) -> None:
    """kube-scheduler filters and scores a pod on one snapshot; prioritize right after this replica
    filtered the pod does the same, and asks Redis nothing."""
    names = ["cy-0", "cy-1"]
    http.post("/filter", json={"Pod": pod("cy-seed"), "Nodes": {"items": [node(n) for n in names]}})
    incoming = pod("cy-p")
    assert http.post("/filter", json={"Pod": incoming, "NodeNames": names}).json()["NodeNames"] == names
    grown = node("cy-1", cpu="32", memory="64Gi")
    grown["metadata"]["resourceVersion"] = "11"
    http.post("/filter", json={"Pod": pod("cy-other"), "Nodes": {"items": [grown]}})  # cy-1 grows meanwhile

    def scores() -> dict[str, int]:
        answer = http.post("/prioritize", json={"Pod": incoming, "NodeNames": names})
        return {entry["Host"]: entry["Score"] for entry in answer.json()}

    cycles_before = _metric(http, "extender_prioritize_cycle_snapshots_total")
    before = _catch_ups(http)
    in_cycle = scores()
    assert _catch_ups(http) - before == 1  # one reading's own catch-up: the prioritize read no Redis
    assert _metric(http, "extender_prioritize_cycle_snapshots_total") - cycles_before == 1
    assert in_cycle["cy-0"] == in_cycle["cy-1"], "the nodes as the pod's filter saw them: alike"
    after_cycle = scores()  # no filter of this pod just before: the current snapshot
    assert after_cycle["cy-1"] > after_cycle["cy-0"], after_cycle
    assert _catch_ups(http) - before == 3 + 1  # three readings since, and this prioritize

    http.post("/filter", json={"Pod": incoming, "NodeNames": names})
    time.sleep(CYCLE_SNAPSHOT_SECONDS + 0.1)  # past a cycle's time the filter's snapshot is not used
    before = _catch_ups(http)
    assert scores() == after_cycle
    assert _catch_ups(http) - before == 1 + 1
