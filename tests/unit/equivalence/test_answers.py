"""A class's verdicts recalled whole on the snapshot it was given them on (extenders.engine.answers)."""

from __future__ import annotations

import dataclasses
import gc
import random

import pytest

from extenders import engine
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.model import NodeInfo, Owner, PodInfo
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from tests.unit.equivalence.test_never_stale import GI, World, _answers, _facts, _pod


def _open_node(name: str, cpu: int = 8000) -> NodeInfo:
    facts = _facts(random.Random(2), name)
    facts.labels = {**facts.labels, "kubernetes.io/hostname": name}
    facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
    facts.allocatable = {"cpu": cpu, "memory": 8 * GI, "pods": 110}
    return NodeInfo.build(name, facts, [])


def _calls(cache: EquivalenceCache, pod: PodInfo, snap: Snapshot, names: list[str]) -> engine.FilterResult:
    return engine.filter_nodes(default_policy(), pod, snap, names, cache.memo(pod, "filter", features=snap.features))


@pytest.mark.parametrize("seed", range(4))
def test_recalled_verdicts_equal_fresh_ones_on_every_snapshot_of_a_changing_cluster(seed: int) -> None:
    # A few classes per snapshot, several pods each, each call naming its own sample of the nodes; some
    # pods sit on a node already or are nominated, and pending pods of two schedulers are nominated to
    # nodes (which a pod yields to only when they are its scheduler's).
    world = World(seed)
    policy = default_policy()
    cache = EquivalenceCache(CacheConfig(max_classes=8))
    rng = random.Random(seed + 200)
    recalled = own = 0
    for step in range(150):
        world.step()
        nominees = {}
        for i in range(rng.randrange(3)):
            nominee = _pod(rng, f"nominee-{step}-{i}", rng.randrange(12))
            nominee.nominated_node_name = rng.choice(list(world.nodes))
            nominee.priority = 1000
            nominee.scheduler_name = rng.choice(("", "other"))
            nominees[nominee.uid] = nominee
        snap = Snapshot(nodes=dict(world.nodes), pending=nominees, sealed=True)
        everything = [*snap.nodes, "ghost"]
        shapes = rng.sample(range(12), 2)
        for call in range(10):
            pod = _pod(rng, f"in-{step}-{call}", rng.choice(shapes))
            pod.scheduler_name = "other" if rng.random() < 0.1 else ""
            host = ""
            if rng.random() < 0.1:  # filtered again while it sits on a node (assumed there)
                info = snap.nodes[rng.choice(list(snap.nodes))]
                if info.pods:
                    pod = dataclasses.replace(next(iter(info.pods.values())), node_name="")
                    host = info.name
            elif rng.random() < 0.1:
                pod.nominated_node_name = rng.choice(list(snap.nodes))
            names = everything
            if rng.random() < 0.5:
                names = rng.sample(everything, rng.randrange(len(everything) // 2, len(everything) + 1))
            # Only a pod on one of the candidates is not the class there (on another node, it may take them).
            mine = host in names or bool(pod.nominated_node_name)
            fresh = engine.filter_nodes(policy, pod, snap, names)
            cached = engine.filter_nodes(policy, pod, snap, names, cache.memo(pod, "filter"))
            assert _answers(cached) == _answers(fresh), f"seed {seed} step {step} call {call}: {pod}"
            recalled += cached.recalled
            own += cached.recalled and mine
    assert own == 0, "a pod on a node, or nominated, never takes its class's verdicts"
    assert recalled > 300, f"classes should have recalled their verdicts often, did {recalled} times"


def test_a_class_recalls_its_verdicts_only_on_the_snapshot_it_was_given_them_on() -> None:
    nodes = {"n1": _open_node("n1"), "n2": _open_node("n2", cpu=100)}
    snap = Snapshot(nodes=dict(nodes), sealed=True)
    cache = EquivalenceCache()
    rng = random.Random(1)
    results = [_calls(cache, _pod(rng, f"p{i}", 0), snap, ["n1", "n2"]) for i in range(4)]
    # Admitted on the second sighting, which notes the snapshot; the third call's verdicts are held;
    # the fourth recalls them.
    assert [r.recalled for r in results] == [False, False, False, True]
    again = _calls(cache, _pod(rng, "p5", 0), snap, ["n2", "n1"])
    assert again.recalled and again.passing == ["n1"] and list(again.unresolvable) == ["n2"]
    assert "Insufficient cpu" in again.unresolvable["n2"]
    same_content = Snapshot(nodes=dict(nodes), sealed=True)
    assert not _calls(cache, _pod(rng, "p6", 0), same_content, ["n1", "n2"]).recalled
    stats = cache.verbs["filter"]
    assert stats.recalled == 0, "counted by the scheduler, not the engine"


def test_a_candidate_not_judged_on_the_snapshot_sends_the_call_through_the_engine() -> None:
    snap = Snapshot(nodes={n: _open_node(n) for n in ("n1", "n2", "n3")}, sealed=True)
    cache = EquivalenceCache()
    rng = random.Random(2)
    for i in range(4):
        _calls(cache, _pod(rng, f"p{i}", 0), snap, ["n1", "n2"])
    assert not _calls(cache, _pod(rng, "p4", 0), snap, ["n1", "n3"]).recalled  # n3: never judged here
    assert _calls(cache, _pod(rng, "p5", 0), snap, ["n3", "n2", "n1"]).recalled  # the engine's call added it


def test_pods_of_a_class_yield_to_their_own_scheduler_s_nominees_only() -> None:
    # n1 has room for one pod; a pod of the default scheduler is nominated there.
    nominee = PodInfo(namespace="ns", name="nominee", uid="nominee", priority=100, nominated_node_name="n1")
    nominee.requests, nominee.nonzero_cpu = {"cpu": 1600}, 1600
    snap = Snapshot(nodes={"n1": _open_node("n1", cpu=2000)}, pending={"nominee": nominee}, sealed=True)
    cache = EquivalenceCache()
    rng = random.Random(3)
    for i in range(5):
        assert _calls(cache, _pod(rng, f"d{i}", 0), snap, ["n1"]).passing == []
    other = _pod(rng, "o", 0)
    other.scheduler_name = "other"
    answer = _calls(cache, other, snap, ["n1"])
    assert not answer.recalled and answer.passing == ["n1"]


def test_pods_of_a_class_with_another_owner_do_not_take_its_verdicts() -> None:
    snap = Snapshot(nodes={"n1": _open_node("n1")}, sealed=True)
    cache = EquivalenceCache()
    rng = random.Random(4)
    for i in range(5):
        pod = _pod(rng, f"a{i}", 0)
        pod.owner = Owner(kind="ReplicaSet", name="a", uid="a")
        _calls(cache, pod, snap, ["n1"])
    assert pod.owner is not None and _calls(cache, dataclasses.replace(pod, uid="a9"), snap, ["n1"]).recalled
    stranger = dataclasses.replace(pod, uid="b", owner=Owner(kind="ReplicaSet", name="b", uid="b"))
    assert not _calls(cache, stranger, snap, ["n1"]).recalled


def test_only_sealed_snapshots_are_held_and_none_is_kept_alive() -> None:
    cache = EquivalenceCache()
    rng = random.Random(5)
    loose = Snapshot(nodes={"n1": _open_node("n1")})
    assert not any(_calls(cache, _pod(rng, f"l{i}", 0), loose, ["n1"]).recalled for i in range(6))
    sealed = Snapshot(nodes={"n1": _open_node("n1")}, sealed=True)
    assert [_calls(cache, _pod(rng, f"s{i}", 0), sealed, ["n1"]).recalled for i in range(3)] == [False, False, True]
    memo = cache.memo(_pod(rng, "probe", 0), "filter")
    assert memo is not None and memo.answered is not None and memo.answered() is sealed
    del sealed
    gc.collect()
    assert memo.answered() is None


def test_a_pod_placed_outside_the_candidates_does_not_take_verdicts_its_own_placement_made() -> None:
    # Pods of one class refuse a zone holding one of them (required zone anti-affinity). X sits on n2
    # (its reservation, or a bound record the watch has not dropped yet) and is filtered again on n1
    # alone: its class-mates are refused n1 because of X, but X is left out of its own count and fits.
    zone = "topology.kubernetes.io/zone"
    n1, n2 = _open_node("n1"), _open_node("n2")
    assert n1.node is not None and n2.node is not None
    n1 = NodeInfo.build("n1", dataclasses.replace(n1.node, labels={**n1.node.labels, zone: "a"}), [])
    rng = random.Random(6)

    def web(uid: str, node: str = "") -> PodInfo:
        pod = _pod(rng, uid, 0)
        pod.affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": pod.labels}, "topologyKey": zone}
                ]
            }
        }
        pod.node_name = node
        return pod

    x = web("x", "n2")
    n2 = NodeInfo.build("n2", dataclasses.replace(n2.node, labels={**n2.node.labels, zone: "a"}), [x])
    snap = Snapshot(nodes={"n1": n1, "n2": n2}, sealed=True)
    cache = EquivalenceCache()
    for i in range(4):
        assert _calls(cache, web(f"w{i}"), snap, ["n1"]).passing == []
    again = dataclasses.replace(x, node_name="")
    fresh = engine.filter_nodes(default_policy(), again, snap, ["n1"])
    assert fresh.passing == ["n1"]
    assert _answers(_calls(cache, again, snap, ["n1"])) == _answers(fresh)
