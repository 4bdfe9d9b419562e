"""/filter, /prioritize and /v1/explain of a real server agree with each other and with the reference.

The engine-level version (tests/unit/test_differential.py) calls the engine on an in-memory
snapshot; this one goes the whole way a production call goes: the state is written into Redis
through the real ``Store`` (as the watcher would), one ``python -m app`` replica catches up
from Redis, and the verdicts come back over HTTP in both candidate forms (NodeNames and full
Nodes). Every seeded cluster replaces the previous one in place (same node names), so the
deletes, moves and re-adds of the catch-up path are exercised too.
"""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import httpx
import pytest
import redis.asyncio as aredis

from extenders.policy import Policy, default_policy
from extenders.sync.convert import node_facts, pod_info
from extenders.sync.store import Op, Store
from tests import reference_scheduler
from tests.gen_cluster import MISSING_NODE, Cluster, candidate_names, gen_cluster, gen_incoming_pod
from tests.plugins.servers import StartServer

pytestmark = pytest.mark.integration

Json = dict[str, Any]
STATES = 300
SEED_BASE = 70_000
NODES_FORM_EVERY = 3  # every third state also goes through the full-Nodes form


class Writer:
    """Writes one generated cluster at a time into the store, replacing the previous one."""

    def __init__(self, store: Store, epoch: int) -> None:
        self.store = store
        self.epoch = epoch
        self.nodes: set[str] = set()
        self.pods: set[str] = set()

    async def replace(self, cluster: Cluster) -> int:
        """One atomic batch: drop what the new state lacks, upsert the rest; returns the generation."""
        facts = [node_facts(n) for n in cluster.nodes]
        pods = [pod_info(p) for p in cluster.pods]
        new_nodes = {f.name for f in facts}
        new_pods = {p.uid for p in pods}
        ops = [Op.delete_pod(uid) for uid in sorted(self.pods - new_pods)]
        ops += [Op.delete_node(name) for name in sorted(self.nodes - new_nodes)]
        ops += [Op.node(f) for f in facts]
        ops += [Op.pod(p) for p in pods]
        self.nodes, self.pods = new_nodes, new_pods
        return await self.store.apply(self.epoch, ops)


def _case(index: int) -> tuple[Cluster, Json, list[str]]:
    rng = random.Random(SEED_BASE + index)
    cluster = gen_cluster(rng)
    for i, node in enumerate(cluster.nodes):
        node["metadata"]["resourceVersion"] = str(index * 100 + i + 1)
    return cluster, gen_incoming_pod(rng, cluster), candidate_names(rng, cluster)


def _expected(policy: Policy, cluster: Cluster, pod: Json, candidates: list[str]) -> dict[str, dict[str, Any]]:
    names = policy.predicate_names
    return {node: reference_scheduler.evaluate(pod, node, cluster.nodes, cluster.pods, names) for node in candidates}


async def _post(client: httpx.AsyncClient, path: str, body: Json) -> Any:
    response = await client.post(path, json=body)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    return response.json()


async def _caught_up(client: httpx.AsyncClient, generation: int, cluster: Cluster) -> None:
    """The replica's snapshot has reached ``generation`` and holds exactly the written nodes."""
    for _ in range(200):
        response = await client.get("/v1/nodes")
        assert response.status_code == 200, response.text
        doc = response.json()
        if doc["generation"] >= generation:
            assert doc["generation"] == generation, "something else wrote to the test's prefix"
            names = {n["name"] for n in doc["nodes"]}
            want = set(cluster.node_names())
            if any(p["spec"].get("nodeName") == MISSING_NODE for p in cluster.pods):
                want.add(MISSING_NODE)  # pods without a Node object: known, but not schedulable
            assert names == want
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the replica never reached generation {generation}")


def _check_filter(where: str, answer: Json, candidates: list[str], fit: dict[str, bool], first: dict[str, Any]) -> None:
    """A filter answer (either form, names already extracted) against the expected verdicts."""
    assert answer["Error"] == "", where
    passing: list[str] = answer["passing"]
    failed: dict[str, str] = answer["FailedNodes"]
    unresolvable: dict[str, str] = answer["FailedAndUnresolvableNodes"]
    assert passing == [n for n in candidates if fit[n]], where
    assert not (set(failed) & set(unresolvable)), where
    assert set(passing) | set(failed) | set(unresolvable) == set(candidates), where
    for node in candidates:
        if fit[node]:
            continue
        _, reason, unres = first[node]
        bucket, other = (unresolvable, failed) if unres else (failed, unresolvable)
        assert bucket.get(node) == reason and node not in other, f"{where} node={node}"


async def _one_state(
    client: httpx.AsyncClient, writer: Writer, policy: Policy, index: int, outcomes: dict[str, set[bool]]
) -> None:
    cluster, pod, candidates = _case(index)
    generation = await writer.replace(cluster)
    await _caught_up(client, generation, cluster)
    where = f"state={index} seed={SEED_BASE + index}"

    nodes_form = index % NODES_FORM_EVERY == 0
    # kube-scheduler sends only the nodes it knows, as full objects, in the Nodes form.
    node_objects = copy.deepcopy(cluster.nodes)
    requests = [
        _post(client, "/filter", {"Pod": pod, "NodeNames": candidates}),
        _post(client, "/v1/explain", {"Pod": pod, "NodeNames": candidates}),
        _post(client, "/prioritize", {"Pod": pod, "NodeNames": candidates}),
    ]
    if nodes_form:
        requests.append(_post(client, "/filter", {"Pod": pod, "Nodes": {"items": node_objects}}))
    by_names, explained, all_scores, *rest = await asyncio.gather(*requests)

    expected = _expected(policy, cluster, pod, candidates)
    names = policy.predicate_names
    fit: dict[str, bool] = {}
    first: dict[str, Any] = {}
    for node in candidates:
        results = expected[node]
        failures = [results[p] for p in names if not results[p][0]]
        fit[node] = not failures
        if failures:
            first[node] = failures[0]
        entry = explained["nodes"][node]
        assert list(entry["predicates"]) == names, f"{where} node={node}"
        for pred in names:
            want_fit, want_reason, want_unres = results[pred]
            have = entry["predicates"][pred]
            assert (have["fit"], have["reason"]) == (want_fit, want_reason), f"{where} node={node} {pred}"
            if not want_fit:
                assert have["unresolvable"] is want_unres, f"{where} node={node} {pred}"
            if want_reason != reference_scheduler.NOT_FOUND:
                outcomes[pred].add(want_fit)
        assert entry["fit"] is fit[node], f"{where} node={node}"
        if not fit[node]:
            assert entry["score"] == 0 and entry["priorities"] == {}, f"{where} node={node}"
    assert set(explained["nodes"]) == set(candidates), where

    assert by_names["Nodes"] is None, where
    _check_filter(f"{where} NodeNames", {**by_names, "passing": by_names["NodeNames"]}, candidates, fit, first)
    if nodes_form:
        by_objects = rest[0]
        real = cluster.node_names()
        assert by_objects["NodeNames"] is None, where
        items = by_objects["Nodes"]["items"]
        passing = [i["metadata"]["name"] for i in items]
        # The passing nodes come back as the very objects that were sent.
        assert items == [n for n in node_objects if n["metadata"]["name"] in set(passing)], where
        _check_filter(f"{where} Nodes", {**by_objects, "passing": passing}, real, fit, first)

    _check_scores(where, all_scores, candidates)
    passing_names: list[str] = by_names["NodeNames"]
    if passing_names:
        scored = await _post(client, "/prioritize", {"Pod": pod, "NodeNames": passing_names})
        _check_scores(where, scored, passing_names)
        explained_scores = {n: explained["nodes"][n]["score"] for n in passing_names}
        assert {s["Host"]: s["Score"] for s in scored} == explained_scores, where
        if nodes_form:
            objects = [n for n in node_objects if n["metadata"]["name"] in set(passing_names)]
            by_objects_scores = await _post(client, "/prioritize", {"Pod": pod, "Nodes": {"items": objects}})
            assert by_objects_scores == scored, where


def _check_scores(where: str, scores: list[Json], hosts: list[str]) -> None:
    assert [s["Host"] for s in scores] == hosts, where
    for s in scores:
        assert type(s["Score"]) is int and 0 <= s["Score"] <= 10, f"{where} {s}"


async def test_http_verbs_agree_with_explain_and_reference(
    start_server: StartServer, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    policy = default_policy()
    server = start_server(env={"EXTENDER_KUBE_MODE": "off"}, name="differential", ready=True)
    store = Store(redis_async, redis_prefix)
    # With the Kubernetes watch off, no replica runs an elector: this test is the only writer.
    attempt = await store.acquire_lease("differential-test#1", ttl=600)
    assert attempt.lease is not None, f"lease held by {attempt.holder!r}"
    writer = Writer(store, attempt.lease.epoch)
    outcomes: dict[str, set[bool]] = {name: set() for name in policy.predicate_names}
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10.0) as client:
            for index in range(STATES):
                await _one_state(client, writer, policy, index, outcomes)
    finally:
        await store.release_lease(attempt.lease)
    # The comparison only means something if every predicate both passed and failed somewhere.
    assert {name: seen for name, seen in outcomes.items() if seen != {True, False}} == {}
