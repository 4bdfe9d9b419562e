"""engine.filter_nodes, engine.explain and the plain reference scheduler agree on random clusters."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from extenders import engine
from extenders.model import ControllerInfo, PodInfo, ServiceInfo
from extenders.plugins.framework import ScoringContext
from extenders.plugins.inter_pod_affinity.scoring import own_queries
from extenders.plugins.registry import SCORERS
from extenders.policy import Policy, default_policy, parse_policy
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery
from extenders.sync.convert import pod_info
from tests import reference_reading, reference_scheduler
from tests.gen_cluster import APPS, TIERS, Cluster, build_snapshot, candidate_names, gen_cluster, gen_incoming_pod

CASES = 300


@pytest.fixture(scope="module")
def policy() -> Policy:
    return default_policy()


@pytest.fixture(scope="module")
def check_all_policy(policy: Policy) -> Policy:
    return policy.model_copy(update={"always_check_all_predicates": True})


def _case(seed: int) -> tuple[Any, dict[str, Any], list[str]]:
    rng = random.Random(seed)
    cluster = gen_cluster(rng)
    return cluster, gen_incoming_pod(rng, cluster), candidate_names(rng, cluster)


@pytest.mark.parametrize("chunk", range(10))
def test_engine_matches_reference(chunk: int, policy: Policy, check_all_policy: Policy) -> None:
    names = policy.predicate_names
    for seed in range(chunk * CASES // 10, (chunk + 1) * CASES // 10):
        cluster, raw_pod, candidates = _case(seed)
        snapshot = build_snapshot(cluster)
        pod = pod_info(raw_pod)
        explained = engine.explain(policy, pod, snapshot, candidates)["nodes"]
        first = engine.filter_nodes(policy, pod, snapshot, candidates)
        every = engine.filter_nodes(check_all_policy, pod, snapshot, candidates)
        for node in candidates:
            where = f"seed={seed} node={node}"
            expected = reference_scheduler.evaluate(raw_pod, node, cluster.nodes, cluster.pods, names)
            got = explained[node]["predicates"]
            for pred in names:
                want_fit, want_reason, want_unres = expected[pred]
                have = got[pred]
                assert (have["fit"], have["reason"]) == (want_fit, want_reason), f"{where} {pred}"
                if not want_fit:
                    assert have["unresolvable"] == want_unres, f"{where} {pred}"
            failures = [expected[p] for p in names if not expected[p][0]]
            fit = not failures
            assert explained[node]["fit"] is fit, where
            for result in (first, every):
                assert (node in result.passing) is fit, where
            if fit:
                continue
            # Stop-at-first reports the first failure in policy order.
            reason, unresolvable = failures[0][1], failures[0][2]
            bucket = first.unresolvable if unresolvable else first.failed
            assert bucket.get(node) == reason, where
            # Check-all joins the distinct reasons; unresolvable when any failure is.
            joined: list[str] = []
            for _, text, _ in failures:
                for part in text.split(", "):
                    if part not in joined:
                        joined.append(part)
            any_unres = any(f[2] for f in failures)
            bucket = every.unresolvable if any_unres else every.failed
            assert bucket.get(node) == ", ".join(joined), where


def test_generator_covers_every_predicate_outcome(policy: Policy) -> None:
    """The random cases are only worth something if every predicate both passes and fails."""
    outcomes: dict[str, set[bool]] = {name: set() for name in policy.predicate_names}
    for seed in range(CASES):
        cluster, raw_pod, candidates = _case(seed)
        explained = engine.explain(policy, pod_info(raw_pod), build_snapshot(cluster), candidates)
        for entry in explained["nodes"].values():
            for pred, verdict in entry["predicates"].items():
                if verdict["reason"] != engine.NODE_NOT_FOUND:
                    outcomes[pred].add(verdict["fit"])
    assert {name: seen for name, seen in outcomes.items() if seen != {True, False}} == {}


def test_fits_after_removing_victims_matches_reference(policy: Policy) -> None:
    """``fits`` on a node with pods removed agrees with the reference run on the reduced cluster."""
    from extenders.model import NodeInfo

    checked = 0
    for seed in range(CASES):
        rng = random.Random(10_000 + seed)
        cluster = gen_cluster(rng)
        raw_pod = gen_incoming_pod(rng, cluster)
        snapshot = build_snapshot(cluster)
        pod = pod_info(raw_pod)
        prepared = engine.prepare_pod(policy, pod, snapshot)
        node_name = rng.choice(cluster.node_names())
        on_node = [p for p in cluster.pods if p["spec"].get("nodeName") == node_name]
        if not on_node:
            continue
        victims = rng.sample(on_node, rng.randint(1, len(on_node)))
        victim_uids = {v["metadata"]["uid"] for v in victims}
        original = snapshot.nodes[node_name]
        reduced = NodeInfo.build(
            node_name, original.node, [p for uid, p in original.pods.items() if uid not in victim_uids]
        )
        got = engine.fits(policy, pod, reduced, snapshot, prepared)
        remaining = [p for p in cluster.pods if p["metadata"]["uid"] not in victim_uids]
        expected = reference_scheduler.evaluate(raw_pod, node_name, cluster.nodes, remaining, policy.predicate_names)
        want = [(r[1], r[2]) for r in expected.values() if not r[0]]
        assert [(v.reason, v.unresolvable) for v in got] == want, f"seed={seed} node={node_name}"
        # And the prepared state of the full snapshot was not disturbed.
        assert engine.fits(policy, pod, original, snapshot, prepared) == engine.fits(policy, pod, original, snapshot)
        checked += 1
    assert checked > CASES // 2


# ------------------------------------------------------------------ index vs scan
OWNERS = ("rs-1", "rs-2", "rs-3")
SELECTOR_KEYS = ("app", "tier")


def _selector(rng: random.Random) -> dict[str, Any]:
    """Selectors the label index must handle: matchLabels, In (several values), mixes, none indexable."""
    roll = rng.random()
    if roll < 0.3:
        return {"matchLabels": {"app": rng.choice(("a", "b", "c"))}}
    if roll < 0.55:
        return {"matchExpressions": [{"key": "app", "operator": "In", "values": rng.sample(["a", "b", "c"], 2)}]}
    if roll < 0.75:
        return {
            "matchLabels": {"app": rng.choice(("a", "b"))},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]}],
        }
    if roll < 0.8:
        return {"matchExpressions": [{"key": rng.choice(SELECTOR_KEYS), "operator": "NotIn", "values": ["db"]}]}
    if roll < 0.9:
        return {"matchExpressions": [{"key": rng.choice(SELECTOR_KEYS), "operator": "Exists"}]}
    return {}


def _term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": _selector(rng),
        "topologyKey": rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
    }
    roll = rng.random()
    if roll < 0.3:
        term["namespaces"] = ["ns1", "ns2"]
    elif roll < 0.4:
        term["namespaceSelector"] = {}
    return term


def _decorate(rng: random.Random, cluster: Any, raw_pod: dict[str, Any]) -> None:
    """Owners, preferred terms and ScheduleAnyway constraints, which gen_cluster does not produce."""
    for pod in [*cluster.pods, raw_pod]:
        meta, spec = pod["metadata"], pod["spec"]
        if rng.random() < 0.6:
            owner = rng.choice(OWNERS)
            reference = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}"}
            meta["ownerReferences"] = [{**reference, "controller": True}]
        if pod is raw_pod or rng.random() < 0.2:
            affinity = spec.setdefault("affinity", {})
            for kind in ("podAffinity", "podAntiAffinity"):
                if rng.random() < 0.6:
                    section = affinity.setdefault(kind, {})
                    terms = [_term(rng) for _ in range(rng.choice((1, 2)))]
                    section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                        {"weight": rng.randint(1, 100), "podAffinityTerm": term} for term in terms
                    ]
    if rng.random() < 0.6:
        raw_pod["spec"].setdefault("topologySpreadConstraints", []).append(
            {
                "maxSkew": rng.choice((1, 2)),
                "topologyKey": rng.choice(("topology.kubernetes.io/zone", "kubernetes.io/hostname")),
                "whenUnsatisfiable": rng.choice(("ScheduleAnyway", "DoNotSchedule")),
                "labelSelector": _selector(rng),
            }
        )


def _scan_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every PodQuery to ignore the label index and scan the node with its full test."""
    original = PodQuery.__init__

    def init(self: PodQuery, match: Any, namespaces: Any, equalities: Any, exact: bool = False) -> None:
        original(self, match, None, equalities, exact)

    monkeypatch.setattr(PodQuery, "__init__", init)


def test_index_and_scan_agree_on_every_verdict_and_score(monkeypatch: pytest.MonkeyPatch) -> None:
    every_priority = [{"name": name, "weight": 1 + i % 3} for i, name in enumerate(sorted(SCORERS))]
    policy = parse_policy({"priorities": every_priority})
    indexed_queries = 0
    for seed in range(150):
        rng = random.Random(50_000 + seed)
        cluster = gen_cluster(rng)
        raw_pod = gen_incoming_pod(rng, cluster)
        _decorate(rng, cluster, raw_pod)
        candidates = candidate_names(rng, cluster)
        snapshot = _spread_tables(rng, build_snapshot(cluster))
        pod = pod_info(raw_pod)
        fast = engine.explain(policy, pod, snapshot, candidates)
        fast_scores = engine.prioritize_nodes(policy, pod, snapshot, candidates)
        indexed_queries += sum(q.indexed for _, _, q in own_queries(pod, snapshot.namespaces))
        with monkeypatch.context() as patch:
            _scan_only(patch)
            slow = engine.explain(policy, pod, snapshot, candidates)
            slow_scores = engine.prioritize_nodes(policy, pod, snapshot, candidates)
        assert fast == slow, f"seed={seed}"
        assert fast_scores == slow_scores, f"seed={seed}"
    assert indexed_queries > 100


def _spread_tables(rng: random.Random, snapshot: Snapshot) -> Snapshot:
    """Services and ReplicaSets for the default spreading selector: some select nothing, some clash."""
    services = {}
    for i in range(rng.randint(0, 4)):
        selector = rng.choice(({}, {"app": rng.choice(APPS)}, {"tier": rng.choice(TIERS)}, {"app": "a", "tier": "db"}))
        namespace = rng.choice(("ns1", "ns2"))
        services[f"{namespace}/svc-{i}"] = ServiceInfo(namespace, f"svc-{i}", selector)
    replica_sets = {}
    for owner in OWNERS:
        if rng.random() < 0.7:
            for namespace in ("ns1", "ns2"):
                replica_sets[f"{namespace}/{owner}"] = ControllerInfo(namespace, owner, _selector(rng))
    return dataclasses.replace(
        snapshot, objects={**snapshot.objects, "services": services, "replica_sets": replica_sets}
    )


def _default_group(pod: PodInfo, snapshot: Snapshot, other: PodInfo) -> bool:
    """Whether ``other`` is in ``pod``'s default spreading group, straight from the definition."""
    merged: dict[str, str] = {}
    for service in snapshot.services.values():
        wanted = service.selector
        if service.namespace == pod.namespace and wanted and all(pod.labels.get(k) == v for k, v in wanted.items()):
            merged.update(wanted)
    controller = None
    owner = pod.owner
    if owner is not None and owner.controller and (owner.api_version, owner.kind) == ("apps/v1", "ReplicaSet"):
        controller = snapshot.replica_sets.get(f"{pod.namespace}/{owner.name}")
    selector = controller.selector if controller is not None else None
    requirements = bool(selector and (selector.get("matchLabels") or selector.get("matchExpressions")))
    if not merged and not requirements:
        return False
    labels = reference_reading.labels_of({"metadata": {"labels": other.labels}})
    return (
        other.namespace == pod.namespace
        and other.deletion_timestamp is None
        and all(labels.get(k) == v for k, v in merged.items())
        and (not requirements or reference_reading.selector_matches(selector, labels))
    )


def test_selector_spread_counts_match_a_scan_of_the_default_selector() -> None:
    spread = SCORERS["SelectorSpread"]
    ctx = ScoringContext(resource_weights={"cpu": 1})
    checked = 0
    for seed in range(150):
        rng = random.Random(60_000 + seed)
        cluster = gen_cluster(rng)
        raw_pod = gen_incoming_pod(rng, cluster)
        _decorate(rng, cluster, raw_pod)
        raw_pod["spec"].pop("topologySpreadConstraints", None)
        snapshot = _spread_tables(rng, build_snapshot(cluster))
        pod = pod_info(raw_pod)
        infos = [i for i in snapshot.nodes.values() if i.node is not None]
        state = spread.prepare(pod, snapshot, infos, ctx)
        for info in infos:
            want = sum(1 for other in info.pods.values() if _default_group(pod, snapshot, other))
            assert spread.score(pod, info, state, ctx) == want, f"seed={seed} node={info.name}"
            checked += want > 0
    assert checked > 30


# ------------------------------------------------------------------ sidecars, pod-level resources, resizes
def _containers_pod(rng: random.Random, name: str, node_name: str = "") -> dict[str, Any]:
    """A pod whose host ports sit on containers, sidecars or plain init containers, maybe with
    pod-level requests and a resize in progress: what the random clusters above never hold."""
    cpu = rng.choice(("500m", "1", "2"))
    container: dict[str, Any] = {"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    spec: dict[str, Any] = {"containers": [container], "initContainers": []}
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    port = {"containerPort": 80, "hostPort": rng.choice((80, 443)), "protocol": "TCP"}
    where = rng.choice(("container", "sidecar", "init", "none"))
    if where == "container":
        container["ports"] = [port]
    elif where != "none":
        init: dict[str, Any] = {"name": "i", "image": "init", "ports": [port]}
        if where == "sidecar":
            init["restartPolicy"] = "Always"
        spec["initContainers"].append(init)
    if rng.random() < 0.3:
        spec["resources"] = {"requests": {"cpu": rng.choice(("1", "3")), "memory": rng.choice(("512Mi", "6Gi"))}}
    if node_name:
        spec["nodeName"] = node_name
        if rng.random() < 0.4:
            allocated = {"cpu": rng.choice(("250m", "3")), "memory": "1Gi"}
            status["containerStatuses"] = [{"name": "c", "allocatedResources": allocated}]
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    return {"metadata": meta, "spec": spec, "status": status}


def test_ports_pod_level_requests_and_resizes_match_reference(policy: Policy) -> None:
    names = ["PodFitsResources", "PodFitsHostPorts"]
    assert set(names) <= set(policy.predicate_names)
    seen: set[tuple[str, bool]] = set()
    for seed in range(200):
        rng = random.Random(80_000 + seed)
        nodes = [
            {
                "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                "status": {
                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
            for i in range(2)
        ]
        pods = [_containers_pod(rng, f"p{j}", f"n{rng.randrange(2)}") for j in range(rng.randint(0, 4))]
        cluster = Cluster(nodes=nodes, pods=pods)
        raw_pod = _containers_pod(rng, "incoming")
        explained = engine.explain(policy, pod_info(raw_pod), build_snapshot(cluster), ["n0", "n1"])["nodes"]
        for node in ("n0", "n1"):
            expected = reference_scheduler.evaluate(raw_pod, node, nodes, pods, names)
            for pred in names:
                have = explained[node]["predicates"][pred]
                assert (have["fit"], have["reason"]) == expected[pred][:2], f"seed={seed} node={node} {pred}"
                seen.add((pred, have["fit"]))
    assert seen == {(pred, fit) for pred in names for fit in (True, False)}
