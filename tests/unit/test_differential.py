"""engine.filter_nodes, engine.explain and the plain reference scheduler agree on random clusters."""

from __future__ import annotations

import random
from typing import Any

import pytest

from extenders import engine
from extenders.convert import pod_info
from extenders.plugins.framework import ScoringContext
from extenders.plugins.inter_pod_affinity.scoring import own_queries
from extenders.plugins.registry import SCORERS
from extenders.policy import Policy, default_policy, parse_policy
from extenders.snapshot.pod_query import PodQuery
from tests import reference_scheduler
from tests.gen_cluster import build_snapshot, candidate_names, gen_cluster, gen_incoming_pod

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
            meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}", "controller": True}]
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
        snapshot = build_snapshot(cluster)
        pod = pod_info(raw_pod)
        fast = engine.explain(policy, pod, snapshot, candidates)
        fast_scores = engine.prioritize_nodes(policy, pod, snapshot, candidates)
        indexed_queries += sum(q.indexed for _, _, q in own_queries(pod))
        with monkeypatch.context() as patch:
            _scan_only(patch)
            slow = engine.explain(policy, pod, snapshot, candidates)
            slow_scores = engine.prioritize_nodes(policy, pod, snapshot, candidates)
        assert fast == slow, f"seed={seed}"
        assert fast_scores == slow_scores, f"seed={seed}"
    assert indexed_queries > 100


def test_selector_spread_counts_by_owner_match_a_scan() -> None:
    spread = SCORERS["SelectorSpread"]
    ctx = ScoringContext(resource_weights={"cpu": 1})
    checked = 0
    for seed in range(100):
        rng = random.Random(60_000 + seed)
        cluster = gen_cluster(rng)
        raw_pod = gen_incoming_pod(rng, cluster)
        _decorate(rng, cluster, raw_pod)
        raw_pod["spec"].pop("topologySpreadConstraints", None)
        snapshot = build_snapshot(cluster)
        pod = pod_info(raw_pod)
        infos = [i for i in snapshot.nodes.values() if i.node is not None]
        state = spread.prepare(pod, snapshot, infos, ctx)
        for info in infos:
            want = sum(
                1
                for other in info.pods.values()
                if pod.owner is not None
                and other.owner is not None
                and other.owner.uid == pod.owner.uid
                and other.namespace == pod.namespace
                and other.deletion_timestamp is None
            )
            assert spread.score(pod, info, state, ctx) == want, f"seed={seed} node={info.name}"
            checked += want > 0
    assert checked > 30
