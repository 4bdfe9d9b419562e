"""Cached filter and prioritize answers equal uncached ones after every change a cluster can see.

A seeded stream of node adds, updates (labels, taints, conditions, capacity, cordon) and
deletes, pod placements, removals and relabels, and filter calls for pods of a dozen shapes
(selectors, tolerations, host ports, disk volumes, anti-affinity, topology spread, pods already
on a node). As in a replica, each step makes a new snapshot that shares every unchanged node.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from extenders import engine
from extenders.engine import filter_cache
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.model import NodeFacts, NodeInfo, PodInfo, PVCInfo, Taint
from extenders.policy import Policy, default_policy
from extenders.snapshot import Snapshot

ZONES = ("a", "b", "c")
APPS = ("web", "db", "cache")
GI = 2**30


def _facts(rng: random.Random, name: str) -> NodeFacts:
    taints = []
    if rng.random() < 0.2:
        taints.append(Taint("dedicated", rng.choice(("gpu", "infra")), rng.choice(("NoSchedule", "NoExecute"))))
    if rng.random() < 0.1:
        taints.append(Taint("soft", "", "PreferNoSchedule"))
    conditions = {"Ready": "True" if rng.random() < 0.9 else "False"}
    if rng.random() < 0.1:
        conditions["DiskPressure"] = "True"
    return NodeFacts(
        name=name,
        labels={
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": rng.choice(ZONES),
            "disk": rng.choice(("ssd", "hdd")),
        },
        taints=taints,
        unschedulable=rng.random() < 0.05,
        conditions=conditions,
        allocatable={"cpu": rng.choice((2000, 4000)), "memory": 8 * GI, "pods": rng.choice((3, 8, 110))},
    )


def _anti_affinity(app: str, key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _spread(app: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]


def _pod(rng: random.Random, uid: str, shape: int) -> PodInfo:
    """Pods of one ``shape`` share an equivalence class (except for their identity)."""
    app = APPS[shape % len(APPS)]
    pod = PodInfo(
        namespace="ns",
        name=f"pod-{uid}",
        uid=uid,
        labels={"app": app},
        requests={"cpu": (shape % 4 + 1) * 500, "memory": GI},
        nonzero_cpu=(shape % 4 + 1) * 500,
        nonzero_memory=GI,
    )
    if shape % 5 == 1:
        pod.node_selector = {"disk": "ssd"}
    if shape % 6 == 2:
        pod.tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    if shape % 4 == 3:
        pod.host_ports = [("TCP", "0.0.0.0", 8080)]
    if shape % 7 == 4:
        pod.volumes = [{"name": "d", "gcePersistentDisk": {"pdName": "disk-1"}}]
    if shape % 8 == 5:
        pod.affinity = _anti_affinity(app, rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")))
    if shape % 9 == 6:
        pod.topology_spread = _spread(app)
    if shape == 11:
        pod.tolerations = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    return pod


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nodes: dict[str, NodeInfo] = {}
        self.serial = 0
        for _ in range(12):
            self.add_node()

    def _uid(self) -> str:
        self.serial += 1
        return f"u{self.serial}"

    def add_node(self) -> None:
        name = f"n{self._uid()}"
        self.nodes[name] = NodeInfo.build(name, _facts(self.rng, name), [])

    def rebuild(self, name: str, facts: NodeFacts | None = None, pods: list[PodInfo] | None = None) -> None:
        old = self.nodes[name]
        self.nodes[name] = NodeInfo.build(
            name, facts if facts is not None else old.node, pods if pods is not None else list(old.pods.values())
        )

    def step(self) -> str:
        rng = self.rng
        names = list(self.nodes)
        name = rng.choice(names)
        old = self.nodes[name]
        assert old.node is not None
        kind = rng.randrange(9)
        if kind == 0:
            self.add_node()
            return "node added"
        if kind == 1 and len(names) > 4:
            del self.nodes[name]
            return "node deleted"
        if kind == 2:
            self.rebuild(name, facts=_facts(rng, name))
            return "node replaced"
        if kind == 3:
            facts = dataclasses.replace(old.node)
            facts.labels = {**facts.labels, "disk": rng.choice(("ssd", "hdd"))}
            facts.unschedulable = not facts.unschedulable if rng.random() < 0.3 else facts.unschedulable
            self.rebuild(name, facts=facts)
            return "node relabelled"
        if kind in (4, 5, 6):
            pod = _pod(rng, self._uid(), rng.randrange(12))
            pod.node_name = name
            self.rebuild(name, pods=[*old.pods.values(), pod])
            return "pod placed"
        if kind == 7 and old.pods:
            gone = rng.choice(list(old.pods))
            self.rebuild(name, pods=[p for u, p in old.pods.items() if u != gone])
            return "pod removed"
        if old.pods:
            uid = rng.choice(list(old.pods))
            pods = [p for u, p in old.pods.items() if u != uid]
            moved = old.pods[uid]
            relabelled = dataclasses.replace(moved)
            relabelled.labels = {"app": rng.choice(APPS)}
            self.rebuild(name, pods=[*pods, relabelled])
            return "pod relabelled"
        return "nothing"

    def snapshot(self) -> Snapshot:
        return Snapshot(nodes=dict(self.nodes))


def _answers(result: engine.FilterResult) -> tuple[list[str], dict[str, str], dict[str, str]]:
    return result.passing, result.failed, result.unresolvable


@pytest.mark.parametrize("seed", range(6))
def test_cached_verdicts_equal_fresh_ones_after_every_change(seed: int) -> None:
    world = World(seed)
    policy = default_policy()
    cache = EquivalenceCache(CacheConfig(max_classes=8))
    rng = random.Random(seed + 100)
    reused = compared = scores_reused = 0
    for step in range(400):
        what = world.step()
        snap = world.snapshot()
        names = [*snap.nodes, "ghost"]
        rng.shuffle(names)
        for _ in range(3):
            pod = _pod(rng, f"in-{step}-{rng.randrange(10**6)}", rng.randrange(12))
            if rng.random() < 0.1:  # a pod filtered again while it sits on a node (assumed there)
                host = snap.nodes[rng.choice(list(snap.nodes))]
                placed = list(host.pods.values())
                if placed:
                    pod = dataclasses.replace(placed[0], node_name="")
            fresh = engine.filter_nodes(policy, pod, snap, names)
            cached = engine.filter_nodes(policy, pod, snap, names, cache.memo(pod, "filter"))
            assert _answers(cached) == _answers(fresh), f"seed {seed} step {step} after {what}: {pod}"
            reused += cached.reused
            compared += len(names)
            counts = engine.ScoreCounts()
            scored = engine.prioritize_nodes(policy, pod, snap, fresh.passing, cache.memo(pod, "prioritize"), counts)
            assert scored == engine.prioritize_nodes(policy, pod, snap, fresh.passing), f"seed {seed} step {step}"
            scores_reused += counts.reused
    assert reused > compared // 4, "the cache should have answered a good share of the nodes"
    assert scores_reused > 1000, "the cache should have answered raw scores too"


def test_policy_order_with_a_cross_node_filter_first_reports_the_same_first_failure() -> None:
    policy = Policy.model_validate(
        {"predicates": ["MatchInterPodAffinity", "PodToleratesNodeTaints", "PodFitsResources", "PodTopologySpread"]}
    )
    world = World(7)
    cache = EquivalenceCache()
    rng = random.Random(3)
    for step in range(200):
        world.step()
        snap = world.snapshot()
        pod = _pod(rng, f"x{step}", rng.randrange(12))
        fresh = engine.filter_nodes(policy, pod, snap, list(snap.nodes))
        cached = engine.filter_nodes(policy, pod, snap, list(snap.nodes), cache.memo(pod))
        assert _answers(cached) == _answers(fresh)


def test_a_verdict_computed_for_a_pod_on_its_own_node_is_not_reused_for_its_siblings() -> None:
    # NoDiskConflict leaves the pod itself out: pod A, already on n1, fits there; its sibling B
    # (same class) conflicts with A's disk and must not inherit A's verdict.
    policy = default_policy()
    rng = random.Random(1)
    a, b = _pod(rng, "a", 4), _pod(rng, "b", 4)
    assert a.volumes and a.volumes == b.volumes
    # kube-scheduler sends A unbound while our snapshot holds it assumed on n1
    placed = dataclasses.replace(a, node_name="n1", assumed=True)
    facts = _facts(random.Random(2), "n1")
    facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
    facts.allocatable = {"cpu": 8000, "memory": 8 * GI, "pods": 110}
    snap = Snapshot(nodes={"n1": NodeInfo.build("n1", facts, [placed])})
    cache = EquivalenceCache()
    for _ in range(2):  # the class is admitted on its second sighting: this one stores
        assert engine.filter_nodes(policy, a, snap, ["n1"], cache.memo(a)).passing == ["n1"]
    sibling = engine.filter_nodes(policy, b, snap, ["n1"], cache.memo(b))
    assert sibling.passing == [] and "n1" in sibling.failed


def test_a_read_write_once_pod_claim_taken_elsewhere_is_not_answered_from_the_cache() -> None:
    # Pods of one class share a ReadWriteOncePod claim (a one-replica Deployment rolling over): the
    # answer on n1 and n2 changes when a pod using the claim lands on n3, though n1 and n2 do not.
    policy = default_policy()
    facts = _facts(random.Random(4), "n")
    facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
    facts.allocatable = {"cpu": 8000, "memory": 8 * GI, "pods": 110}
    nodes = {n: NodeInfo.build(n, dataclasses.replace(facts, name=n), []) for n in ("n1", "n2", "n3")}

    def claimant(uid: str, node: str = "") -> PodInfo:
        volume = {"name": "data", "persistentVolumeClaim": {"claimName": "solo"}}
        return PodInfo(namespace="ns", name=uid, uid=uid, node_name=node, volumes=[volume])

    def snapshot(user: PodInfo | None) -> Snapshot:
        table = dict(nodes)
        if user is not None:
            table["n3"] = NodeInfo.build("n3", nodes["n3"].node, [user])
        pvcs = {"ns/solo": PVCInfo("ns", "solo", read_write_once_pod=True)}
        return Snapshot(nodes=table, objects={"pvcs": pvcs}, sealed=True)

    cache = EquivalenceCache()
    names = ["n1", "n2", "n3"]
    free = snapshot(None)
    for i in range(2):  # the class is admitted on its second sighting: this one stores
        assert engine.filter_nodes(policy, claimant(f"a{i}"), free, names, cache.memo(claimant(f"a{i}"))).passing
    for user in (claimant("old", "n3"), None):
        snap = snapshot(user)
        pod = claimant("new")
        fresh = engine.filter_nodes(policy, pod, snap, names)
        cached = engine.filter_nodes(policy, pod, snap, names, cache.memo(pod))
        assert _answers(cached) == _answers(fresh)
        assert (fresh.passing == []) is (user is not None)


def test_a_warm_class_reads_only_the_nodes_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A class whose steps are all node-local answers a candidate whose NodeInfo it judged before
    # without walking it; a node the snapshot replaced (any change) is walked again.
    policy = default_policy()
    world = World(11)
    rng = random.Random(5)
    pod = _pod(rng, "walker", 0)  # no terms, no spread: every step node-local
    walked: list[str] = []
    walk = filter_cache._filter_walk

    def counted(prepared: Any, names: list[str], memo: Any, hold: bool) -> engine.FilterResult:
        walked.extend(names)
        return walk(prepared, names, memo, hold)

    monkeypatch.setattr(filter_cache, "_filter_walk", counted)
    cache = EquivalenceCache()
    changed: list[str] = []
    for step in range(60):
        snap = world.snapshot()
        names = sorted(snap.nodes)
        before = dict(snap.nodes)
        walked.clear()
        cached = engine.filter_nodes(policy, pod, snap, names, cache.memo(pod, "filter"))
        assert _answers(cached) == _answers(engine.filter_nodes(policy, pod, snap, names)), f"step {step}"
        if step >= 2:  # admitted on the second sighting; from the third call on, only changes are walked
            assert sorted(walked) == sorted(changed), f"step {step}"
        world.step()
        changed = [n for n, info in world.nodes.items() if before.get(n) is not info]


def test_a_pending_pod_reserved_on_a_candidate_does_not_lend_its_verdict_to_its_class() -> None:
    # As the test above, with the pod pending in the snapshot too (as the watch writes it) and held
    # on n1 by its own reservation: the snapshot says where it can be without reading any node.
    policy = default_policy()
    rng = random.Random(1)
    a, b = _pod(rng, "a", 4), _pod(rng, "b", 4)
    placed = dataclasses.replace(a, node_name="n1", assumed=True)
    facts = _facts(random.Random(2), "n1")
    facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
    facts.allocatable = {"cpu": 8000, "memory": 8 * GI, "pods": 110}
    other = dataclasses.replace(facts, name="n2", labels={**facts.labels, "kubernetes.io/hostname": "n2"})
    snap = Snapshot(
        nodes={"n1": NodeInfo.build("n1", facts, [placed]), "n2": NodeInfo.build("n2", other, [])},
        pending={a.uid: a, b.uid: b},
        sealed=True,
    )
    cache = EquivalenceCache()
    for _ in range(3):
        assert engine.filter_nodes(policy, a, snap, ["n1", "n2"], cache.memo(a)).passing == ["n1", "n2"]
    sibling = engine.filter_nodes(policy, b, snap, ["n1", "n2"], cache.memo(b))
    assert sibling.passing == ["n2"] and "n1" in sibling.failed
    assert engine.filter_nodes(policy, a, snap, ["n2", "n1"], cache.memo(a)).passing == ["n2", "n1"]


def test_a_node_changed_in_place_is_judged_again() -> None:
    # Work copies (tests, preemption's trials) edit a NodeInfo in place; its version changes with
    # every pod added or removed, so a verdict held for it does not outlive the edit.
    policy = default_policy()
    facts = _facts(random.Random(6), "n1")
    facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
    facts.allocatable = {"cpu": 1000, "memory": 8 * GI, "pods": 110}
    info = NodeInfo.build("n1", facts, [])
    snap = Snapshot(nodes={"n1": info})
    pod = PodInfo(namespace="ns", name="p", uid="p", requests={"cpu": 600}, nonzero_cpu=600, nonzero_memory=GI)
    cache = EquivalenceCache()
    for _ in range(3):
        assert engine.filter_nodes(policy, pod, snap, ["n1"], cache.memo(pod)).passing == ["n1"]
        assert engine.prioritize_nodes(policy, pod, snap, ["n1"], cache.memo(pod, "prioritize"))
    before = engine.prioritize_nodes(policy, pod, snap, ["n1"], cache.memo(pod, "prioritize"))
    info.add_pod(PodInfo(namespace="ns", name="q", uid="q", node_name="n1", requests={"cpu": 500}, nonzero_cpu=500))
    cached = engine.filter_nodes(policy, pod, snap, ["n1"], cache.memo(pod))
    assert cached.passing == [] and "n1" in cached.failed
    assert _answers(cached) == _answers(engine.filter_nodes(policy, pod, snap, ["n1"]))
    fresh = engine.prioritize_nodes(policy, pod, snap, ["n1"])
    assert engine.prioritize_nodes(policy, pod, snap, ["n1"], cache.memo(pod, "prioritize")) == fresh != before


class _CountedEntries(dict[str, Any]):
    """A class's filter entries, noting which node names were looked up."""

    def __init__(self, entries: dict[str, Any], reads: list[str]) -> None:
        super().__init__(entries)
        self.reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.append(key)
        return super().get(key, default)


def test_with_steps_that_read_other_nodes_a_warm_class_reads_only_changed_nodes_entries() -> None:
    # An anti-affinity pod: its inter-pod step runs on every node, but the node-local verdicts of
    # nodes whose NodeInfo did not change are taken as noted, without reading their entries.
    policy = default_policy()
    world = World(12)
    rng = random.Random(9)
    pod = _pod(rng, "crosser", 5)
    assert pod.affinity and "podAntiAffinity" in pod.affinity
    cache = EquivalenceCache()
    reads: list[str] = []
    changed: list[str] = []
    for step in range(60):
        snap = world.snapshot()
        names = sorted(snap.nodes)
        before = dict(snap.nodes)
        memo = cache.memo(pod, "filter")
        assert memo is not None
        if not isinstance(memo.filter, _CountedEntries):
            memo.filter = _CountedEntries(memo.filter, reads)
        reads.clear()
        cached = engine.filter_nodes(policy, pod, snap, names, memo)
        assert _answers(cached) == _answers(engine.filter_nodes(policy, pod, snap, names)), f"step {step}"
        if step >= 2:
            assert sorted(reads) == sorted(changed), f"step {step}"
        world.step()
        changed = [n for n, info in world.nodes.items() if before.get(n) is not info]
