"""Replica catch-up: one round trip when unchanged, only changed nodes fetched, tombstones, the floor."""

from __future__ import annotations

import dataclasses
import gc
import random

import pytest

from extenders.model import ControllerInfo, NamespaceInfo, NodeFacts, PVCInfo, ServiceInfo
from extenders.snapshot import Snapshot
from extenders.sync.cache import GC_FREEZE_MIN_PODS, SnapshotCache
from extenders.sync.kinds import (
    NAMESPACES,
    PDBS,
    PODGROUPS,
    PVCS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
)
from extenders.sync.records import CONTROLLER, NAMESPACE, NODE, PDB, PODGROUP, PVC, SERVICE
from extenders.sync.store import Op, Store
from tests.store.conftest import RoundTrips
from tests.store.helpers import node, pod, seed


def _facts(facts: NodeFacts | None) -> dict[str, object] | None:
    """The facts without the resourceVersion: a heartbeat updates it in Redis without a generation bump."""
    if facts is None:
        return None
    return NODE.encode(facts)


def summary(snap: Snapshot) -> dict[str, object]:
    """Everything a replica's snapshot says, in comparable form."""
    return {
        "nodes": {
            name: (
                info.generation,
                _facts(info.node),
                info.requested_with_pods(),
                info.nonzero_cpu,
                sorted((u, p.assumed) for u, p in info.pods.items()),
            )
            for name, info in snap.nodes.items()
        },
        "pending": sorted(snap.pending),
        "pdbs": {k: PDB.encode(v) for k, v in snap.pdbs.items()},
        "podgroups": {k: PODGROUP.encode(v) for k, v in snap.podgroups.items()},
        "namespaces": {k: NAMESPACE.encode(v) for k, v in snap.namespaces.items()},
        "pvcs": {k: PVC.encode(v) for k, v in snap.pvcs.items()},
        "services": {k: SERVICE.encode(v) for k, v in snap.services.items()},
        "replication_controllers": {k: CONTROLLER.encode(v) for k, v in snap.replication_controllers.items()},
        "replica_sets": {k: CONTROLLER.encode(v) for k, v in snap.replica_sets.items()},
        "stateful_sets": {k: CONTROLLER.encode(v) for k, v in snap.stateful_sets.items()},
        "generation": snap.generation,
    }


async def fresh(store: Store) -> Snapshot:
    return await SnapshotCache(store).refresh()


async def test_full_load(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store, batch=7)  # several pipelined batches
    snap = await cache.refresh()
    assert cache.loaded and cache.stats.full_loads == 1
    assert len(snap.nodes) == 20 and snap.generation == await store.generation()
    assert snap.nodes["n3"].requested_with_pods() == {"cpu": 300, "memory": 3 << 20, "pods": 3}
    assert snap.nodes["n3"].node is not None and snap.nodes["n3"].node.resource_version == "1"
    assert set(snap.pending) == {"pending-1"} and set(snap.pdbs) == {"default/b1"}
    assert snap.podgroups["default/g1"].min_member == 2


async def test_unchanged_refresh_is_one_round_trip(counted: tuple[Store, RoundTrips], epoch: int) -> None:
    store, trips = counted
    await seed(store, epoch)
    cache = SnapshotCache(store)
    first = await cache.refresh()
    await cache.refresh()  # scripts are cached server-side from here on
    trips.count = 0
    for _ in range(5):
        assert await cache.refresh() is first
    assert trips.count == 5 and cache.stats.unchanged >= 5


async def test_a_change_is_one_round_trip_and_only_changed_nodes_are_rebuilt(
    counted: tuple[Store, RoundTrips], epoch: int
) -> None:
    store, trips = counted
    await seed(store, epoch)
    cache = SnapshotCache(store)
    before = await cache.refresh()
    await cache.refresh()
    await store.apply(epoch, [Op.pod(pod("new", "n5", cpu=500)), Op.node(node("n7", rv="2", cpu=1000))])
    trips.count = 0
    after = await cache.refresh()
    assert trips.count == 1 and cache.stats.deltas == 1 and cache.stats.full_loads == 1
    changed = {n for n in after.nodes if after.nodes[n] is not before.nodes[n]}
    assert changed == {"n5", "n7"}
    assert after.nodes["n5"].requested["cpu"] == 800 and after.nodes["n7"].allocatable["cpu"] == 1000
    assert after.nodes["n5"].generation == after.generation
    # on the changed node, records whose bytes did not change are not parsed again
    assert all(after.nodes["n5"].pods[u] is before.nodes["n5"].pods[u] for u in before.nodes["n5"].pods)
    # the snapshot handed out earlier was not touched
    assert before.nodes["n5"].requested["cpu"] == 300 and "new" not in before.nodes["n5"].pods
    assert summary(after) == summary(await fresh(store))


async def test_a_changed_record_is_parsed_again(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    before = await cache.refresh()
    await store.apply(epoch, [Op.pod(pod("u2-1", "n2", cpu=900))])
    after = await cache.refresh()
    assert after.nodes["n2"].pods["u2-1"] is not before.nodes["n2"].pods["u2-1"]
    assert after.nodes["n2"].pods["u2-1"].requests["cpu"] == 900 and after.nodes["n2"].requested["cpu"] == 1100
    assert after.nodes["n2"].pods["u2-0"] is before.nodes["n2"].pods["u2-0"]


async def test_deletions_propagate_through_tombstones(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    await cache.refresh()
    ops = [Op.delete_node("n1")] + [Op.delete_pod(f"u1-{j}") for j in range(3)]  # node and its pods gone
    ops += [Op.delete_node("n2"), Op.delete_pod("u3-0"), Op.delete_pod("pending-1")]  # n2 keeps pods, no facts
    ops += [PDBS.delete("default/b1"), PODGROUPS.delete("default/g1")]
    await store.apply(epoch, ops)
    snap = await cache.refresh()
    assert cache.stats.full_loads == 1 and cache.stats.deltas == 1
    assert "n1" not in snap.nodes
    assert snap.nodes["n2"].node is None and len(snap.nodes["n2"].pods) == 3
    assert "u3-0" not in snap.nodes["n3"].pods
    assert snap.pending == {} and snap.pdbs == {} and snap.podgroups == {}
    assert summary(snap) == summary(await fresh(store))


async def test_namespaces_and_claims_catch_up_incrementally(counted: tuple[Store, RoundTrips], epoch: int) -> None:
    store, trips = counted
    await seed(store, epoch)
    team = NamespaceInfo("team", {"kubernetes.io/metadata.name": "team", "tier": "gold"})
    await store.apply(epoch, [NAMESPACES.upsert(team), PVCS.upsert(PVCInfo("team", "data", True))])
    cache = SnapshotCache(store)
    before = await cache.refresh()
    assert before.namespaces == {"team": team} and before.pvcs["team/data"].read_write_once_pod
    await cache.refresh()
    relabelled = NamespaceInfo("team", {"kubernetes.io/metadata.name": "team", "tier": "silver"})
    await store.apply(epoch, [NAMESPACES.upsert(relabelled), PVCS.upsert(PVCInfo("team", "logs", False))])
    trips.count = 0
    after = await cache.refresh()
    assert trips.count == 1 and cache.stats.deltas == 1 and cache.stats.full_loads == 1
    assert after.namespaces["team"].labels["tier"] == "silver" and set(after.pvcs) == {"team/data", "team/logs"}
    assert after.nodes is before.nodes  # nothing else was rebuilt
    assert before.namespaces["team"].labels["tier"] == "gold"  # the earlier snapshot was not touched
    await store.apply(epoch, [NAMESPACES.delete("team"), PVCS.delete("team/data")])
    gone = await cache.refresh()
    assert gone.namespaces == {} and set(gone.pvcs) == {"team/logs"}
    assert gone.pvcs is not after.pvcs and summary(gone) == summary(await fresh(store))
    # a change to nodes only keeps the Namespace table object (what selector resolution is cached on)
    await store.apply(epoch, [Op.pod(pod("late", "n1"))])
    assert (await cache.refresh()).namespaces is gone.namespaces


async def test_services_and_controllers_catch_up_incrementally(counted: tuple[Store, RoundTrips], epoch: int) -> None:
    store, trips = counted
    await seed(store, epoch)
    web = ServiceInfo("shop", "web", {"app": "web"})
    rs = ControllerInfo("shop", "web-1", {"matchLabels": {"app": "web"}})
    await store.apply(
        epoch, [SERVICES.upsert(web), REPLICA_SETS.upsert(rs), STATEFUL_SETS.upsert(ControllerInfo("shop", "db", None))]
    )
    cache = SnapshotCache(store)
    before = await cache.refresh()
    assert before.services == {"shop/web": web} and before.replica_sets == {"shop/web-1": rs}
    assert before.stateful_sets["shop/db"].selector is None and before.replication_controllers == {}
    rc = ControllerInfo("shop", "old", {"app": "old"})
    await store.apply(
        epoch, [SERVICES.upsert(ServiceInfo("shop", "web", {"app": "web2"})), REPLICATION_CONTROLLERS.upsert(rc)]
    )
    trips.count = 0
    after = await cache.refresh()
    assert trips.count == 1 and cache.stats.deltas == 1 and cache.stats.full_loads == 1
    assert after.services["shop/web"].selector == {"app": "web2"} and after.replication_controllers == {"shop/old": rc}
    assert after.nodes is before.nodes and after.replica_sets is before.replica_sets  # untouched tables kept
    assert before.services["shop/web"].selector == {"app": "web"}  # the earlier snapshot was not touched
    await store.apply(epoch, [REPLICA_SETS.delete("shop/web-1"), STATEFUL_SETS.delete("shop/db")])
    gone = await cache.refresh()
    assert gone.replica_sets == {} and gone.stateful_sets == {} and gone.services is after.services
    assert summary(gone) == summary(await fresh(store))
    # a change to nodes only keeps every selector table object (what the default selector is remembered on)
    await store.apply(epoch, [Op.pod(pod("late", "n1"))])
    later = await cache.refresh()
    assert later.services is gone.services and later.replication_controllers is gone.replication_controllers


async def test_assumed_pods_show_in_the_snapshot(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    await cache.refresh()
    await store.assume_pod(pod("pending-1"), "n4", None, ttl=30)
    snap = await cache.refresh()
    assert snap.nodes["n4"].pods["pending-1"].assumed and snap.nodes["n4"].requested["cpu"] == 400
    await store.forget_pod("pending-1")
    assert "pending-1" not in (await cache.refresh()).nodes["n4"].pods


async def test_a_replica_older_than_the_floor_reloads(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    await cache.refresh()
    await store.apply(epoch, [Op.delete_pod("u0-0"), PDBS.delete("default/b1")])
    await store.apply(epoch, [Op.pod(pod("late", "n9"))])
    gen = await store.generation()
    assert await store.compact(gen) == gen
    assert await store.redis.zscore(store.key("pendingz"), "pending-1") is not None  # live entries stay
    assert await store.redis.zscore(store.key("pdbz"), "default/b1") is None  # tombstone compacted
    assert await store.redis.zcard(store.key("tombs")) == 0
    snap = await cache.refresh()
    assert cache.stats.full_loads == 2
    assert "u0-0" not in snap.nodes["n0"].pods and "late" in snap.nodes["n9"].pods and snap.pdbs == {}
    # a replica at or above the floor keeps catching up incrementally
    await store.apply(epoch, [Op.delete_pod("late")])
    await cache.refresh()
    assert cache.stats.full_loads == 2 and cache.stats.deltas == 1


async def test_too_many_changes_fall_back_to_a_full_load(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store, max_delta_items=5)
    await cache.refresh()
    await store.apply(epoch, [Op.pod(pod(f"x{i}", f"n{i}")) for i in range(10)])
    snap = await cache.refresh()
    assert cache.stats.full_loads == 2 and cache.stats.deltas == 0
    assert summary(snap) == summary(await fresh(store))


async def test_only_a_large_snapshot_is_moved_out_of_the_collectors_sight(store: Store, epoch: int) -> None:
    """A full load of many pods ends with a full collection and gc.freeze (no later GC pass walks them);
    a small one skips both, since the collection would cost more than it saves."""
    await seed(store, epoch, nodes=4, pods_per_node=2)
    gc.unfreeze()
    await SnapshotCache(store).refresh()
    assert gc.get_freeze_count() == 0
    await seed(store, epoch, nodes=20, pods_per_node=GC_FREEZE_MIN_PODS // 20)
    try:
        snap = await SnapshotCache(store).refresh()
        assert sum(len(info.pods) for info in snap.nodes.values()) >= GC_FREEZE_MIN_PODS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("seed", [7, 11, 23])
async def test_random_histories_match_a_fresh_load(store: Store, epoch: int, seed: int) -> None:
    """Differential: a replica catching up after each step agrees with one loading from scratch."""
    rng = random.Random(seed)
    cache = SnapshotCache(store)
    nodes = [f"n{i}" for i in range(8)]
    uids = [f"p{i}" for i in range(40)]
    for _step in range(60):
        ops: list[Op] = []
        for _ in range(rng.randint(1, 6)):
            roll = rng.random()
            uid, name = rng.choice(uids), rng.choice(nodes)
            if roll < 0.35:
                ops.append(Op.pod(pod(uid, name, cpu=rng.choice([100, 200, 300]))))
            elif roll < 0.45:
                ops.append(Op.pod(pod(uid)))
            elif roll < 0.6:
                ops.append(Op.delete_pod(uid))
            elif roll < 0.75:
                ops.append(Op.node(node(name, rv=str(rng.randint(1, 5)), cpu=rng.choice([2000, 4000]))))
            elif roll < 0.85:
                ops.append(Op.delete_node(name))
            else:
                ops.append(Op.pod(pod(uid, name, phase="Succeeded")))
        await store.apply(epoch, ops)
        roll = rng.random()
        if roll < 0.1:
            await store.assume_pod(pod(rng.choice(uids)), rng.choice(nodes), None, ttl=30)
        elif roll < 0.15:
            await store.forget_pod(rng.choice(uids))
        elif roll < 0.2:
            await store.compact(await store.generation() - rng.randint(0, 3))
        if rng.random() < 0.7:
            assert summary(await cache.refresh()) == summary(await fresh(store))
    assert cache.stats.deltas > 10


async def test_the_nominated_index_is_patched_forward_by_catch_up(store: Store, epoch: int) -> None:
    await seed(store, epoch)
    cache = SnapshotCache(store)
    first = await cache.refresh()
    assert first.nominated() == {}
    nominated = dataclasses.replace(pod("preemptor"), nominated_node_name="n2", priority=100)
    await store.apply(epoch, [Op.pod(nominated)])
    second = await cache.refresh()
    assert second.nominated_seed is not None  # handed over by catch-up, not rescanned
    assert {n: [p.uid for p in ps] for n, ps in second.nominated().items()} == {"n2": ["preemptor"]}
    await store.apply(epoch, [Op.pod(dataclasses.replace(nominated, node_name="n3"))])  # bound: no longer nominated
    third = await cache.refresh()
    assert third.nominated() == {} and third.nominated() == (await fresh(store)).nominated()
