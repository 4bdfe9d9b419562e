"""Pod lifecycle in the Redis store, as in kube-scheduler's cache: assume, confirm, update, remove, forget, expire."""

from __future__ import annotations

import asyncio

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
from extenders.sync.store import AssumeStatus, Op, Store
from tests.store.helpers import dump, node, pending, pod, pods_on


async def test_bound_pod_lands_on_its_node_and_bumps_generations(store: Store, epoch: int) -> None:
    gen = await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u1", "n1"))])
    assert gen == await store.generation() == 1
    assert await store.node_generation("n1") == 1
    facts, pods = await store.read_node("n1")
    assert facts is not None and facts.resource_version == "1" and facts.allocatable["cpu"] == 4000
    assert list(pods) == ["u1"] and not pods["u1"].assumed and pods["u1"].node_name == "n1"
    assert await store.placed_pods() == {"u1": "n1"}


async def test_unchanged_writes_bump_nothing(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u1", "n1")), Op.pod(pod("u2"))])
    before = await dump(store)
    assert await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u1", "n1")), Op.pod(pod("u2"))]) == 1
    assert await dump(store) == before


async def test_node_heartbeat_only_records_the_resource_version(store: Store, epoch: int) -> None:
    await store.put_node(epoch, node("n1", rv="10"))
    assert await store.put_node(epoch, node("n1", rv="11")) == 1  # same facts, new resourceVersion
    facts, _ = await store.read_node("n1")
    assert facts is not None and facts.resource_version == "11"
    assert await store.put_node(epoch, node("n1", rv="12", cpu=8000)) == 2


async def test_pod_pods_may_reference_a_node_without_facts(store: Store, epoch: int) -> None:
    await store.add_pod(epoch, pod("u1", "ghost"))
    facts, pods = await store.read_node("ghost")
    assert facts is None and list(pods) == ["u1"]


async def test_pending_then_bound_moves_out_of_pending_with_a_tombstone(store: Store, epoch: int) -> None:
    await store.add_pod(epoch, pod("u1"))
    assert await pending(store) == {"u1"}
    gen = await store.add_pod(epoch, pod("u1", "n1"))
    assert await pending(store) == set()
    assert await store.redis.zscore(store.key("pendingz"), "u1") == gen  # tombstone: member stays
    assert list(await pods_on(store, "n1")) == ["u1"]


async def test_update_rewrites_the_record(store: Store, epoch: int) -> None:
    await store.add_pod(epoch, pod("u1", "n1"))
    gen = await store.update_pod(epoch, pod("u1", "n1", labels={"a": "b"}))
    assert gen == 2 and (await pods_on(store, "n1"))["u1"].labels == {"a": "b"}


async def test_remove_deletes_everywhere_and_leaves_a_node_tombstone(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.pod(pod("u1", "n1")), Op.pod(pod("u2"))])
    gen = await store.apply(epoch, [Op.delete_pod("u1"), Op.delete_pod("u2")])
    assert await pods_on(store, "n1") == {}
    assert await store.placed_pods() == {} and await pending(store) == set()
    assert not await store.redis.exists(store.node_key("n1"))
    assert await store.node_generation("n1") == gen  # the node stays in the index: replicas learn it is gone
    assert await store.redis.zscore(store.key("tombs"), "n:n1") == gen


async def test_terminal_pods_are_removed(store: Store, epoch: int) -> None:
    await store.add_pod(epoch, pod("u1", "n1"))
    await store.add_pod(epoch, pod("u2", "n1"))
    await store.apply(epoch, [Op.pod(pod("u1", "n1", phase="Succeeded")), Op.pod(pod("u2", "n1", phase="Failed"))])
    assert await pods_on(store, "n1") == {} and await store.placed_pods() == {}
    await store.add_pod(epoch, pod("u3", phase="Failed"))
    assert await pending(store) == set()


async def test_assume_then_confirm(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u1"))])
    result = await store.assume_pod(pod("u1"), "n1", await store.node_generation("n1"), ttl=30)
    assert result.status is AssumeStatus.ASSUMED and result.ok
    assert result.generation == await store.node_generation("n1") == await store.generation()
    placed = await pods_on(store, "n1")
    assert placed["u1"].assumed and placed["u1"].node_name == "n1"
    assert "u1" in await store.assumed_pods()
    assert await pending(store) == {"u1"}  # the API still says unbound
    # the watch still sees it unbound (e.g. a status update): the reservation stays
    await store.add_pod(epoch, pod("u1", labels={"x": "y"}))
    assert (await pods_on(store, "n1"))["u1"].assumed
    # the watch sees it bound: confirmed
    await store.add_pod(epoch, pod("u1", "n1"))
    placed = await pods_on(store, "n1")
    assert not placed["u1"].assumed and await store.assumed_pods() == {}
    assert await pending(store) == set()


async def test_confirm_on_another_node_moves_the_pod(store: Store, epoch: int) -> None:
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    await store.add_pod(epoch, pod("u1", "n2"))
    assert await pods_on(store, "n1") == {}
    assert list(await pods_on(store, "n2")) == ["u1"]
    assert await store.placed_pods() == {"u1": "n2"}


async def test_assume_conflict_writes_nothing(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u0", "n1"))])
    seen = await store.node_generation("n1")
    await store.add_pod(epoch, pod("u2", "n1"))  # the node changed after the fit was checked
    before = await dump(store)
    result = await store.assume_pod(pod("u1"), "n1", seen, ttl=30)
    assert result.status is AssumeStatus.CONFLICT and not result.ok
    assert result.generation == await store.node_generation("n1") != seen
    assert await dump(store) == before
    # re-validated against the current generation, it goes through
    assert (await store.assume_pod(pod("u1"), "n1", result.generation, ttl=30)).ok


async def test_assume_of_a_bound_pod_is_refused(store: Store, epoch: int) -> None:
    await store.add_pod(epoch, pod("u1", "n1"))
    result = await store.assume_pod(pod("u1"), "n2", None, ttl=30)
    assert result.status is AssumeStatus.ALREADY_BOUND and result.node == "n1"
    assert await store.placed_pods() == {"u1": "n1"}


async def test_reassume_moves_the_reservation(store: Store) -> None:
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    await store.assume_pod(pod("u1"), "n2", None, ttl=30)
    assert await pods_on(store, "n1") == {} and list(await pods_on(store, "n2")) == ["u1"]


async def test_forget_only_removes_assumed_pods(store: Store, epoch: int) -> None:
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    await store.add_pod(epoch, pod("u2", "n1"))
    assert not await store.forget_pod("u1", "n2")  # assumed elsewhere: no-op
    assert not await store.forget_pod("u2")  # confirmed by the watch: stays
    gen = await store.generation()
    assert await store.forget_pod("u1", "n1")
    assert list(await pods_on(store, "n1")) == ["u2"]
    assert await store.assumed_pods() == {} and await store.generation() == gen + 1
    assert not await store.forget_pod("u1")


async def test_expiry_removes_only_unconfirmed_assumed_pods(store: Store, epoch: int) -> None:
    await store.assume_pod(pod("short"), "n1", None, ttl=0.05)
    await store.assume_pod(pod("long"), "n1", None, ttl=30)
    await store.assume_pod(pod("confirmed"), "n1", None, ttl=0.05)
    await store.add_pod(epoch, pod("confirmed", "n1"))
    await asyncio.sleep(0.1)
    assert await store.expire_assumed() == ["short"]
    assert set(await pods_on(store, "n1")) == {"long", "confirmed"}
    assert await store.expire_assumed() == []


async def test_touch_assumed_extends_the_deadline(store: Store, epoch: int) -> None:
    await store.assume_pod(pod("u1"), "n1", None, ttl=0.05)
    assert await store.touch_assumed("u1", 30)
    await asyncio.sleep(0.1)
    assert await store.expire_assumed() == []
    await store.add_pod(epoch, pod("u1", "n1"))
    assert not await store.touch_assumed("u1", 30)


async def test_deleting_an_assumed_pod_drops_the_reservation(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.pod(pod("u1"))])
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    await store.remove_pod(epoch, "u1")
    assert await pods_on(store, "n1") == {} and await store.assumed_pods() == {} and await pending(store) == set()


async def test_deleting_a_node_voids_its_reservations_but_keeps_its_bound_pods(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("u1")), Op.pod(pod("u2", "n1"))])
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    generation = await store.generation()
    await store.apply(epoch, [Op.delete_node("n1")])
    assert list(await pods_on(store, "n1")) == ["u2"]  # the API still has it bound there
    assert await store.assumed_pods() == {} and await store.placed_pods() == {"u2": "n1"}
    assert await pending(store) == {"u1"}
    assert await store.node_generation("n1") > generation  # replicas see the change
    # Created again under the same name: the reservation does not come back with it.
    await store.apply(epoch, [Op.node(node("n1"))])
    assert list(await pods_on(store, "n1")) == ["u2"]


async def test_relist_delete_keeps_assumed_pods(store: Store, epoch: int) -> None:
    await store.assume_pod(pod("u1"), "n1", None, ttl=30)
    await store.add_pod(epoch, pod("u2", "n1"))
    await store.apply(epoch, [Op.delete_pod_unless_assumed("u1"), Op.delete_pod_unless_assumed("u2")])
    assert list(await pods_on(store, "n1")) == ["u1"]


async def test_pdbs_and_podgroups(store: Store, epoch: int) -> None:
    from extenders.model import PDBInfo, PodGroupInfo

    group = PodGroupInfo("ml", "g", min_member=3, creation_timestamp="2024-01-01T00:00:00Z")
    await store.apply(epoch, [PDBS.upsert(PDBInfo("ns", "b", {"matchLabels": {}}, 1)), PODGROUPS.upsert(group)])
    assert await store.record(PODGROUPS, "ml/g") == group
    assert await store.hash_keys("pdb") == {"ns/b"}
    gen = await store.apply(epoch, [PDBS.delete("ns/b"), PODGROUPS.delete("ml/g")])
    assert await store.record(PODGROUPS, "ml/g") is None and await store.hash_keys("pdb") == set()
    assert await store.redis.zscore(store.key("pdbz"), "ns/b") == gen


async def test_namespaces_and_pvcs(store: Store, epoch: int) -> None:
    from extenders.model import NamespaceInfo, PVCInfo

    team = NamespaceInfo("team", {"kubernetes.io/metadata.name": "team", "tier": "gold"})
    claim = PVCInfo("team", "data", read_write_once_pod=True)
    gen = await store.apply(epoch, [NAMESPACES.upsert(team), PVCS.upsert(claim)])
    assert await store.redis.zscore(store.key("nsz"), "team") == gen
    assert await store.redis.zscore(store.key("pvcz"), "team/data") == gen
    assert await store.hash_keys("ns") == {"team"} and await store.hash_keys("pvc") == {"team/data"}
    # the same records again change nothing: no generation bump
    assert await store.apply(epoch, [NAMESPACES.upsert(team), PVCS.upsert(claim)]) == gen
    relabelled = NamespaceInfo("team", {"kubernetes.io/metadata.name": "team", "tier": "silver"})
    assert await store.apply(epoch, [NAMESPACES.upsert(relabelled)]) == gen + 1
    gone = await store.apply(epoch, [NAMESPACES.delete("team"), PVCS.delete("team/data")])
    assert await store.hash_keys("ns") == set() and await store.hash_keys("pvc") == set()
    assert await store.redis.zscore(store.key("tombs"), "ns:team") == gone
    assert await store.redis.zscore(store.key("tombs"), "pvc:team/data") == gone
    await store.compact(gone)
    assert await store.redis.zscore(store.key("nsz"), "team") is None
    assert await store.redis.zscore(store.key("pvcz"), "team/data") is None


async def test_refresh_node_if_newer(store: Store) -> None:
    assert await store.refresh_node_if_newer(node("n1", rv="9"))  # unknown node: stored
    gen = await store.generation()
    assert not await store.refresh_node_if_newer(node("n1", rv="8", cpu=1))  # older
    assert not await store.refresh_node_if_newer(node("n1", rv="9", cpu=1))  # same version
    assert not await store.refresh_node_if_newer(node("n1", rv="10"))  # newer but unchanged: no write
    assert await store.generation() == gen
    facts, _ = await store.read_node("n1")
    assert facts is not None and facts.resource_version == "10" and facts.allocatable["cpu"] == 4000
    assert await store.refresh_node_if_newer(node("n1", rv="100", cpu=8000))  # "100" > "10" as integers
    assert not await store.refresh_node_if_newer(node("n1", rv="99", cpu=1))  # "99" < "100" as integers
    assert not await store.refresh_node_if_newer(node("n1", rv="opaque", cpu=2))  # cannot be ordered
    facts, _ = await store.read_node("n1")
    assert facts is not None and facts.allocatable["cpu"] == 8000 and await store.generation() == gen + 1


async def test_synced_marker(store: Store, epoch: int) -> None:
    assert await store.synced() is None
    await store.mark_synced(epoch, "yes")
    assert await store.synced() == "yes"


async def test_services_and_controllers_keep_their_selectors_with_tombstones(store: Store, epoch: int) -> None:
    from extenders.model import ControllerInfo, ServiceInfo

    service = ServiceInfo("shop", "web", {"app": "web"})
    rc = ControllerInfo("shop", "old", {"app": "old"})
    rs = ControllerInfo("shop", "web-1", {"matchLabels": {"app": "web", "pod-template-hash": "1"}})
    ss = ControllerInfo("shop", "db", {"matchLabels": {"app": "db"}})
    writes = [
        SERVICES.upsert(service),
        REPLICATION_CONTROLLERS.upsert(rc),
        REPLICA_SETS.upsert(rs),
        STATEFUL_SETS.upsert(ss),
    ]
    gen = await store.apply(epoch, writes)
    for table, key in (("svc", "shop/web"), ("rc", "shop/old"), ("rs", "shop/web-1"), ("sts", "shop/db")):
        assert await store.redis.zscore(store.key(f"{table}z"), key) == gen
        assert await store.hash_keys(table) == {key}
    assert await store.apply(epoch, writes) == gen  # the same selectors again: no generation bump
    assert (
        await store.apply(epoch, [REPLICA_SETS.upsert(ControllerInfo("shop", "web-1", {"matchLabels": {}}))]) == gen + 1
    )
    deletes = [
        SERVICES.delete("shop/web"),
        REPLICATION_CONTROLLERS.delete("shop/old"),
        REPLICA_SETS.delete("shop/web-1"),
        STATEFUL_SETS.delete("shop/db"),
    ]
    gone = await store.apply(epoch, deletes)
    for table, key in (("svc", "shop/web"), ("rc", "shop/old"), ("rs", "shop/web-1"), ("sts", "shop/db")):
        assert await store.hash_keys(table) == set()
        assert await store.redis.zscore(store.key("tombs"), f"{table}:{key}") == gone
    await store.compact(gone)
    for table, key in (("svc", "shop/web"), ("rc", "shop/old"), ("rs", "shop/web-1"), ("sts", "shop/db")):
        assert await store.redis.zscore(store.key(f"{table}z"), key) is None
    assert await store.redis.zcard(store.key("tombs")) == 0
