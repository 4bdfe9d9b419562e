"""The snapshot summary equals a fresh walk after every kind of change, and is never served stale."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

from extenders import engine
from extenders.model import NodeFacts, NodeInfo, PodInfo, label_key
from extenders.plugins.framework import SKIP
from extenders.plugins.inter_pod_affinity.filtering import InterPodAffinityFilter
from extenders.plugins.pod_topology_spread.filtering import TopologySpreadFilter
from extenders.policy import default_policy
from extenders.snapshot import Snapshot
from extenders.snapshot import summary as cluster_summary
from extenders.snapshot.summary import ClusterSummary
from tests.plugin_cases import make_node, make_pod, make_snapshot

IMAGES = ("img-a", "img-b", "img-c")
HOSTNAME = "kubernetes.io/hostname"
ANTI: dict[str, Any] = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def _pod(rng: random.Random, uid: str) -> PodInfo:
    return PodInfo(
        namespace=rng.choice(("ns1", "ns2")),
        name=uid,
        uid=uid,
        labels={"app": rng.choice(("a", "b", "c"))},
        affinity=ANTI if rng.random() < 0.2 else {},
    )


def _facts(rng: random.Random, name: str) -> NodeFacts:
    return NodeFacts(
        name=name,
        images={i: rng.randrange(1, 4) for i in IMAGES if rng.random() < 0.5},
        labels={HOSTNAME: rng.choice((name, f"{name}-renamed"))},
    )


def _node(rng: random.Random, name: str, serial: list[int]) -> NodeInfo:
    pods = []
    for _ in range(rng.randrange(4)):
        serial[0] += 1
        pods.append(_pod(rng, f"p{serial[0]}"))
    return NodeInfo.build(name, _facts(rng, name) if rng.random() < 0.9 else None, pods)


def _name(info: NodeInfo) -> str:
    return info.name


def _expected(snapshot: Snapshot) -> dict[str, Any]:
    infos = list(snapshot.nodes.values())
    return {
        "total": sum(i.node is not None for i in infos),
        "images": {img: sum(1 for i in infos if i.node is not None and img in i.node.images) for img in IMAGES},
        # kube-scheduler's one size per image: the first holder's by name
        "sizes": {
            img: next((i.node.images[img] for i in sorted(infos, key=_name) if i.node and img in i.node.images), 0)
            for img in IMAGES
        },
        "anti": {i.name for i in infos if i.pods_with_required_anti_affinity},
        "affinity": {i.name for i in infos if i.pods_with_affinity},
        "labels": {
            (ns, app): {i.name for i in infos if label_key(ns, "app", app) in i.pods_by_label}
            for ns in ("ns1", "ns2")
            for app in ("a", "b", "c")
        },
    }


def _observed(summary: ClusterSummary) -> dict[str, Any]:
    return {
        "total": summary.total,
        "images": {img: summary.image_nodes(img) for img in IMAGES},
        "sizes": {img: summary.image_size(img) for img in IMAGES},
        "anti": set(summary.names_with_anti_affinity_pods()),
        "affinity": set(summary.names_with_affinity_pods()),
        "labels": {
            (ns, app): set(summary.names_with_label(label_key(ns, "app", app)))
            for ns in ("ns1", "ns2")
            for app in ("a", "b", "c")
        },
    }


def _random_walk(seed: int, steps: int) -> Iterator[Snapshot]:
    """Snapshots through every kind of change: in place, derived from the last one, nodes added and removed."""
    rng = random.Random(seed)
    serial = [0]
    nodes = {f"n{i}": _node(rng, f"n{i}", serial) for i in range(30)}
    snapshot = Snapshot(nodes=nodes)
    for step in range(steps):
        yield snapshot
        roll = rng.random()
        name = rng.choice(sorted(snapshot.nodes))
        info = snapshot.nodes[name]
        if roll < 0.3:  # in place, as tests and preemption's work copies do
            serial[0] += 1
            info.add_pod(_pod(rng, f"p{serial[0]}"))
        elif roll < 0.45 and info.pods:
            info.remove_pod(rng.choice(sorted(info.pods)))
        elif roll < 0.7:  # a new snapshot sharing the other nodes, as SnapshotCache builds it
            fresh = dict(snapshot.nodes)
            fresh[name] = NodeInfo.build(name, _facts(rng, name), list(info.pods.values()))
            snapshot = Snapshot(nodes=fresh, summary_seed=snapshot.seed())
        elif roll < 0.8:  # node facts replaced in place
            info.node = _facts(rng, name)
        elif roll < 0.9:  # a node added or removed
            fresh = dict(snapshot.nodes)
            if rng.random() < 0.5 and len(fresh) > 5:
                del fresh[name]
            else:
                fresh[f"extra{step}"] = _node(rng, f"extra{step}", serial)
            snapshot = Snapshot(nodes=fresh, summary_seed=snapshot.seed())


def test_summary_matches_a_walk_through_random_changes() -> None:
    derived, previous = 0, None
    for step, snapshot in enumerate(_random_walk(3, 300)):
        summary = snapshot.summary()
        assert _observed(summary) == _expected(snapshot), step
        derived += previous is not None and snapshot is not previous
        previous = snapshot
    assert derived > 30


def test_sealed_snapshots_derive_their_summary_from_the_changed_nodes_alone(monkeypatch: Any) -> None:
    """As the replica cache builds them: each sealed snapshot names the nodes it replaced, some
    snapshots are never asked for a summary (their changes carry over), a node added or removed
    falls back to comparing the tables. Every summary equals a walk, and the tables are not compared
    when the changes are known."""
    rng = random.Random(11)
    serial = [0]
    snapshot = Snapshot(nodes={f"n{i}": _node(rng, f"n{i}", serial) for i in range(30)}, sealed=True)
    compared = []
    original = ClusterSummary.derive

    def derive(self: ClusterSummary, *args: Any, **kwargs: Any) -> ClusterSummary:
        compared.append(len(args) < 4 and kwargs.get("indexes") is None)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ClusterSummary, "derive", derive)
    asked = 0
    for step in range(300):
        fresh = dict(snapshot.nodes)
        names = rng.sample(sorted(fresh), rng.randrange(1, 4))
        for name in names:
            info = fresh[name]
            pods = list(info.pods.values())
            if rng.random() < 0.5 and pods:
                pods.pop(rng.randrange(len(pods)))
            else:
                serial[0] += 1
                pods.append(_pod(rng, f"p{serial[0]}"))
            fresh[name] = NodeInfo.build(name, _facts(rng, name) if rng.random() < 0.3 else info.node, pods)
        if rng.random() < 0.05:  # a node added: the tables are compared
            names.append(f"extra{step}")
            fresh[f"extra{step}"] = _node(rng, f"extra{step}", serial)
        snapshot = Snapshot(
            nodes=fresh, sealed=True, summary_seed=snapshot.seed(), node_changes=snapshot.changes_since_seed(names)
        )
        if rng.random() < 0.6:
            asked += 1
            assert _observed(snapshot.summary()) == _expected(snapshot), step
            state = InterPodAffinityFilter().prepare(
                PodInfo(namespace="ns1", name="in", uid="in", labels={"app": "a"}), snapshot
            )
            counts = {} if state is SKIP else state.existing_anti_counts
            assert counts == _existing_anti(
                snapshot, PodInfo(namespace="ns1", name="in", uid="in", labels={"app": "a"})
            )
    assert asked > 150
    assert compared.count(False) > 100 and compared.count(True) >= 1  # mostly from the changes alone


def _existing_anti(snapshot: Snapshot, incoming: PodInfo) -> dict[tuple[str, str], int]:
    """Existing pods' required anti-affinity terms (ANTI: app=a, same namespace) selecting ``incoming``, by a walk."""
    counts: Counter[tuple[str, str]] = Counter()
    for info in snapshot.nodes.values():
        if info.node is None or incoming.labels.get("app") != "a":
            continue
        for pod in info.pods.values():
            if pod.affinity and pod.namespace == incoming.namespace and pod.uid != incoming.uid:
                counts[(HOSTNAME, info.node.labels[HOSTNAME])] += 1
    return dict(counts)


def test_existing_anti_affinity_counts_follow_every_change() -> None:
    """The InterPodAffinity filter's tally of existing anti-affinity terms equals a walk after every change,
    for incoming pods of every namespace and label, and for one whose own terms are on a node."""
    checked = 0
    for step, snapshot in enumerate(_random_walk(5, 300)):
        placed = next((p for i in snapshot.nodes.values() for p in i.pods.values() if p.affinity), None)
        incoming = [
            PodInfo(namespace=ns, name="in", uid="in", labels={"app": app}) for ns in ("ns1", "ns2") for app in "ab"
        ]
        for pod in [*incoming, *([placed] if placed is not None else [])]:
            state = InterPodAffinityFilter().prepare(pod, snapshot)
            counts = {} if state is SKIP else state.existing_anti_counts
            assert counts == _existing_anti(snapshot, pod), (step, pod.namespace, pod.labels)
            checked += bool(counts)
    assert checked > 300


def test_unchanged_table_reuses_the_summary_and_a_change_does_not() -> None:
    rng = random.Random(4)
    serial = [0]
    snapshot = Snapshot(nodes={f"n{i}": _node(rng, f"n{i}", serial) for i in range(10)})
    first = snapshot.summary()
    assert Snapshot(nodes=dict(snapshot.nodes), summary_seed=first).summary() is first  # same NodeInfo objects
    snapshot.nodes["n0"].add_pod(_pod(rng, "late"))
    assert snapshot.summary() is not first


def test_many_changes_start_over_and_stay_right(monkeypatch: Any) -> None:
    monkeypatch.setattr(cluster_summary, "_PATCH_LIMIT", 2)
    rng = random.Random(5)
    serial = [0]
    snapshot = Snapshot(nodes={f"n{i}": _node(rng, f"n{i}", serial) for i in range(10)})
    _observed(snapshot.summary())
    rebuilt = Snapshot(nodes={name: _node(rng, name, serial) for name in snapshot.nodes}, summary_seed=snapshot.seed())
    assert _observed(rebuilt.summary()) == _expected(rebuilt)


def test_engine_never_serves_a_stale_summary() -> None:
    """Filter, then give a node a pod whose anti-affinity repels the incoming pod, in place."""
    policy = default_policy()
    snapshot = make_snapshot(make_node("n1"), make_node("n2"))
    incoming = make_pod("in", labels={"app": "a"})
    assert engine.filter_nodes(policy, incoming, snapshot, ["n1", "n2"]).passing == ["n1", "n2"]
    snapshot.nodes["n2"].add_pod(make_pod("guard", spec={"affinity": ANTI}, node_name="n2"))
    result = engine.filter_nodes(policy, incoming, snapshot, ["n1", "n2"])
    assert result.passing == ["n1"] and "n2" in result.failed


def test_a_sealed_snapshot_reuses_its_summary_without_a_walk(monkeypatch: Any) -> None:
    rng = random.Random(5)
    serial = [0]
    sealed = Snapshot(nodes={f"n{i}": _node(rng, f"n{i}", serial) for i in range(20)}, sealed=True)
    first = sealed.summary()
    walks: list[int] = []
    original = ClusterSummary.same_table

    def counting(self: ClusterSummary, *args: Any) -> bool:
        walks.append(1)
        return original(self, *args)

    monkeypatch.setattr(ClusterSummary, "same_table", counting)
    assert sealed.summary() is first
    assert walks == [], "a sealed snapshot seen last time needs no table check"
    # An unsealed snapshot with the same table is still checked (it may have been edited in place).
    loose = Snapshot(nodes=dict(sealed.nodes), summary_seed=sealed.seed())
    assert loose.summary() is first
    assert walks == [1]
    # A new sealed snapshot (the cache's next one) is checked once, then reused.
    changed = dict(sealed.nodes)
    changed["n0"] = _node(rng, "n0", serial)
    nxt = Snapshot(nodes=changed, sealed=True, summary_seed=sealed.seed())
    derived = nxt.summary()
    assert derived is not first
    assert nxt.summary() is derived
    assert len(walks) == 2


def _zone(info: NodeInfo) -> str | None:
    return info.node.labels.get("zone") if info.node is not None else None


def test_columns_are_patched_for_changed_nodes_only() -> None:
    nodes = [make_node(f"n{i}", labels={"zone": f"z{i % 2}"}) for i in range(6)]
    first = Snapshot(nodes={n.name: n for n in nodes})
    before = first.summary().column("zone", _zone)
    assert before == {f"n{i}": f"z{i % 2}" for i in range(6)}

    changed = dict(first.nodes)
    changed["n1"] = NodeInfo.build("n1", NodeFacts(name="n1", labels={"zone": "z9"}), [])
    changed["n2"] = NodeInfo.build("n2", NodeFacts(name="n2", labels={}), [])
    changed["n3"] = NodeInfo.build("n3", None, [])
    after = Snapshot(nodes=changed, summary_seed=first.seed()).summary().column("zone", _zone)

    assert after == {"n0": "z0", "n1": "z9", "n4": "z0", "n5": "z1"}
    assert before == {f"n{i}": f"z{i % 2}" for i in range(6)}  # the old table's column is untouched


def _with_image(name: str, size: int | None) -> NodeInfo:
    return NodeInfo.build(name, NodeFacts(name=name, images={} if size is None else {"img": size}), [])


def _derived(seed: Snapshot, *replaced: NodeInfo) -> ClusterSummary:
    nodes = dict(seed.nodes)
    nodes.update((info.name, info) for info in replaced)
    return Snapshot(nodes=nodes, summary_seed=seed.seed()).summary()


def test_a_pod_only_change_keeps_the_cached_image_size() -> None:
    first = Snapshot(nodes={n.name: n for n in (_with_image("n1", 5), _with_image("n2", 7))})
    assert first.summary().image_size("img") == 5
    n1 = first.nodes["n1"]
    busier = NodeInfo.build("n1", n1.node, [make_pod("late", node_name="n1")])  # the same NodeFacts object
    derived = _derived(first, busier)
    assert derived._image_sizes == {"img": ("n1", 5)}  # carried over, not dropped for a recount
    assert derived.image_size("img") == 5


def test_a_facts_change_that_can_move_the_size_recomputes_it() -> None:
    first = Snapshot(nodes={n.name: n for n in (_with_image("n1", 5), _with_image("n2", 7), _with_image("n3", 9))})
    assert first.summary().image_size("img") == 5
    # A later holder's facts cannot change the size kept by the first one.
    later = _derived(first, _with_image("n3", 4))
    assert later._image_sizes == {"img": ("n1", 5)} and later.image_size("img") == 5
    # The first holder reports another size, drops the image, or an earlier node lists it.
    assert _derived(first, _with_image("n1", 6)).image_size("img") == 6
    dropped = _derived(first, _with_image("n1", None))
    assert "img" not in dropped._image_sizes and dropped.image_size("img") == 7
    earlier = Snapshot(nodes={**first.nodes, "n0": _with_image("n0", None)})
    assert earlier.summary().image_size("img") == 5
    assert _derived(earlier, _with_image("n0", 3)).image_size("img") == 3


def test_pods_of_one_workload_share_one_spread_tally_and_tallies_are_capped() -> None:
    """A pod's own labels (a StatefulSet's pod-name) do not split the spread counts: pods with the same
    constraints share one tally. Tallies beyond the cap drop the least recently used, and a dropped
    one is rebuilt with the same counts."""
    rng = random.Random(21)
    serial = [0]
    snapshot = Snapshot(nodes={f"n{i}": _node(rng, f"n{i}", serial) for i in range(12)}, sealed=True)
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "a"}},
        }
    ]

    def member(i: int) -> PodInfo:
        labels = {"app": "a", "pod-name": f"web-{i}"}
        return PodInfo(namespace="ns1", name=f"web-{i}", uid=f"web-{i}", labels=labels, topology_spread=spread)

    spread_filter = TopologySpreadFilter()
    first = spread_filter.prepare(member(0), snapshot)
    summary = snapshot.summary()
    before = set(summary._tallies)
    second = spread_filter.prepare(member(1), snapshot)
    assert set(summary._tallies) == before and len(before) == 1
    assert first.counts == second.counts and sum(first.counts[0].values()) > 0
    cap = cluster_summary._MAX_TALLIES
    for i in range(cap + 5):  # other namespaces: a tally each
        other = dataclasses.replace(member(i), namespace=f"other-{i}", uid=f"o{i}")
        spread_filter.prepare(other, snapshot)
    assert len(summary._tallies) == cap
    assert spread_filter.prepare(member(2), snapshot).counts == first.counts  # rebuilt after its eviction
