"""The watcher against the fake kube-apiserver: list+watch converge, 410 means relist, relists write only diffs."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.kube.client import PODGROUP_GROUP_VERSION, BindStatus, KubeClient
from extenders.kube.config import build_http_client
from extenders.snapshot import Snapshot
from extenders.sync.cache import SnapshotCache
from extenders.sync.store import Store
from tests.fake_kube.builders import (
    make_namespace,
    make_node,
    make_pdb,
    make_pod,
    make_podgroup,
    make_pvc,
    make_service,
    make_workload,
)
from tests.integration.watch_feed import Feed
from tests.plugins.fake_kube import FakeKube, StartFakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


def expected_requests(fake: FakeKube) -> dict[str, tuple[int, int]]:
    """node -> (cpu millicores, pod count) over the fake's bound, non-terminal pods: the ground truth."""
    out: dict[str, tuple[int, int]] = {}
    for item in fake.client.list("Pod")["items"]:
        node = item["spec"].get("nodeName")
        if not node or item["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        cpu = sum(
            int(c["resources"].get("requests", {}).get("cpu", "0m").rstrip("m")) for c in item["spec"]["containers"]
        )
        total, count = out.get(node, (0, 0))
        out[node] = (total + cpu, count + 1)
    return out


def actual_requests(snap: Snapshot) -> dict[str, tuple[int, int]]:
    return {name: (info.requested.get("cpu", 0), len(info.pods)) for name, info in snap.nodes.items() if info.pods}


async def converged(cache: SnapshotCache, fake: FakeKube) -> Snapshot:
    async def check() -> Snapshot | None:
        snap = await cache.refresh()
        assert actual_requests(snap) == expected_requests(fake)
        nodes = {n["metadata"]["name"] for n in fake.client.list("Node")["items"]}
        assert {n for n, i in snap.nodes.items() if i.node is not None} == nodes
        pending = {
            p["metadata"]["uid"]
            for p in fake.client.list("Pod")["items"]
            if not p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")
        }
        assert set(snap.pending) == pending
        return snap

    result: Snapshot = await eventually(check)
    return result


def populate(fake: FakeKube, nodes: int = 5, pods: int = 20) -> list[dict[str, Any]]:
    for i in range(nodes):
        fake.client.create(make_node(f"node-{i}", cpu="8"))
    created = []
    for j in range(pods):
        node = f"node-{j % nodes}" if j % 4 else None  # every fourth pod pending
        created.append(fake.client.create(make_pod(f"pod-{j}", cpu=f"{100 + j}m", node_name=node)))
    fake.client.create(make_pdb("budget", match_labels={"app": "x"}, disruptions_allowed=1))
    fake.client.create(make_podgroup("gang", min_member=3))
    return created


async def test_list_then_watch_converges(fake_kube: FakeKube, feed: Feed) -> None:
    populate(fake_kube)
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await eventually(feed.store.synced)
    snap = await converged(cache, fake_kube)
    assert watcher.stats.synced and watcher.stats.of("pods").lists == 1
    assert set(snap.pdbs) == {"default/budget"} and snap.pdbs["default/budget"].disruptions_allowed == 1
    assert snap.podgroups["default/gang"].min_member == 3
    assert snap.nodes["node-1"].allocatable["cpu"] == 8000
    await fake_kube.watching("pods")

    # changes through the watch: bind pending pods, add, delete, finish a pod, change a node
    fake_kube.client.bind("pod-0", "node-3")
    fake_kube.client.create(make_pod("late", cpu="700m", node_name="node-2"))
    fake_kube.client.delete("Pod", "pod-5")
    fake_kube.client.patch("Pod", "pod-6", {"status": {"phase": "Succeeded"}}, status=True)
    fake_kube.client.patch("Node", "node-4", {"spec": {"unschedulable": True}}, namespace=None)
    fake_kube.client.delete("PodDisruptionBudget", "budget")
    fake_kube.client.create(make_node("node-5", cpu="2"))
    snap = await converged(cache, fake_kube)
    node4 = snap.nodes["node-4"].node
    assert node4 is not None and node4.unschedulable
    assert snap.pdbs == {} and snap.nodes["node-5"].allocatable["cpu"] == 2000
    # no relist was needed: one list, one watch (the fake's list count also has this test's own lists)
    assert watcher.stats.of("pods").lists == 1 and fake_kube.requests("watch", "pods") == 1


async def test_namespaces_and_claims_are_listed_then_watched(fake_kube: FakeKube, feed: Feed) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_namespace("team-a", {"team": "a"}))
    fake_kube.client.create(make_pvc("solo", "team-a", ["ReadWriteOncePod"]))
    fake_kube.client.create(make_pvc("shared", "team-a", ["ReadWriteMany"]))
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await eventually(feed.store.synced)
    snap = await cache.refresh()
    assert snap.namespaces["team-a"].labels == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert {k: v.read_write_once_pod for k, v in snap.pvcs.items()} == {"team-a/solo": True, "team-a/shared": False}
    assert watcher.stats.of("namespaces").lists == 1 and watcher.stats.of("persistentvolumeclaims").lists == 1
    await fake_kube.watching("namespaces")
    await fake_kube.watching("persistentvolumeclaims")

    # changes through the watch: relabel, add and delete namespaces and claims
    fake_kube.client.patch("Namespace", "team-a", {"metadata": {"labels": {"team": "b"}}}, namespace=None)
    fake_kube.client.create(make_namespace("team-c"))
    fake_kube.client.create(make_pvc("late", "team-c", ["ReadWriteOnce", "ReadWriteOncePod"]))
    fake_kube.client.delete("PersistentVolumeClaim", "shared", namespace="team-a")

    async def caught_up() -> Snapshot | None:
        snap = await cache.refresh()
        assert snap.namespaces["team-a"].labels["team"] == "b" and "team-c" in snap.namespaces
        assert {k: v.read_write_once_pod for k, v in snap.pvcs.items()} == {"team-a/solo": True, "team-c/late": True}
        return snap

    await eventually(caught_up)
    fake_kube.client.delete("Namespace", "team-c", namespace=None)

    async def team_c_gone() -> bool:
        return "team-c" not in (await cache.refresh()).namespaces

    await eventually(team_c_gone)
    assert watcher.stats.of("namespaces").lists == 1  # all through the watch


async def test_services_and_controllers_selectors_are_listed_then_watched(fake_kube: FakeKube, feed: Feed) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_service("web", "shop", {"app": "web"}))
    fake_kube.client.create(make_service("headless", "shop"))  # no selector
    fake_kube.client.create(make_workload("ReplicationController", "old", "shop", {"app": "old"}))
    fake_kube.client.create(make_workload("ReplicaSet", "web-1", "shop", {"matchLabels": {"app": "web", "h": "1"}}))
    fake_kube.client.create(make_workload("StatefulSet", "db", "shop"))
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await eventually(feed.store.synced)

    def selectors(snap: Snapshot) -> dict[str, Any]:
        return {
            "svc": {k: v.selector for k, v in snap.services.items()},
            "rc": {k: v.selector for k, v in snap.replication_controllers.items()},
            "rs": {k: v.selector for k, v in snap.replica_sets.items()},
            "sts": {k: v.selector for k, v in snap.stateful_sets.items()},
        }

    async def listed() -> bool:
        return selectors(await cache.refresh()) == {
            "svc": {"shop/web": {"app": "web"}, "shop/headless": {}},
            "rc": {"shop/old": {"app": "old"}},
            "rs": {"shop/web-1": {"matchLabels": {"app": "web", "h": "1"}}},
            "sts": {"shop/db": {"matchLabels": {"app": "db"}}},
        }

    await eventually(listed)
    for kind in ("services", "replicationcontrollers", "replicasets", "statefulsets"):
        assert watcher.stats.of(kind).lists == 1
        await fake_kube.watching(kind)

    # through the watch: a scale (status and replicas only) rewrites nothing; selectors change, go, arrive
    before = await feed.store.generation()
    fake_kube.client.patch("ReplicaSet", "web-1", {"spec": {"replicas": 5}}, namespace="shop")
    fake_kube.client.patch("Service", "web", {"spec": {"selector": {"app": "web2"}}}, namespace="shop")
    fake_kube.client.delete("ReplicationController", "old", namespace="shop")
    fake_kube.client.create(make_workload("ReplicaSet", "web-2", "shop", {"matchLabels": {"app": "web", "h": "2"}}))
    fake_kube.client.delete("StatefulSet", "db", namespace="shop")

    async def caught_up() -> bool:
        got = selectors(await cache.refresh())
        return got == {
            "svc": {"shop/web": {"app": "web2"}, "shop/headless": {}},
            "rc": {},
            "rs": {
                "shop/web-1": {"matchLabels": {"app": "web", "h": "1"}},
                "shop/web-2": {"matchLabels": {"app": "web", "h": "2"}},
            },
            "sts": {},
        }

    await eventually(caught_up)
    # four changes, each its own write at most: the scale of web-1 bumped nothing
    assert await feed.store.generation() - before <= 4
    assert watcher.stats.of("replicasets").lists == 1  # all through the watch


async def test_410_on_rewatch_relists_and_the_snapshot_is_right_afterwards(fake_kube: FakeKube, feed: Feed) -> None:
    populate(fake_kube)
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await converged(cache, fake_kube)
    await fake_kube.watching("pods")
    lists_before = fake_kube.requests("list", "pods")

    # changes the broken watch never delivers, then history compaction: the re-watch gets a 410 ERROR event
    fake_kube.break_watches()
    fake_kube.client.delete("Pod", "pod-1")
    fake_kube.client.bind("pod-4", "node-0")
    fake_kube.client.create(make_pod("while-away", cpu="300m", node_name="node-1"))
    fake_kube.compact()
    await eventually(lambda: _ready(fake_kube.requests("list", "pods") > lists_before))
    assert watcher.stats.of("pods").gone >= 1
    snap = await converged(cache, fake_kube)
    assert "while-away" in {p.name for p in snap.nodes["node-1"].pods.values()}


async def _ready(value: bool) -> bool:
    return value


async def test_http_410_on_watch_relists(fake_kube: FakeKube, feed: Feed) -> None:
    populate(fake_kube, nodes=2, pods=4)
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await converged(cache, fake_kube)
    await fake_kube.watching("pods")
    fake_kube.client.add_fault(410, match="/api/v1/pods?", count=1, message="too old resource version")
    fake_kube.break_watches("pods")
    await eventually(lambda: _ready(watcher.stats.of("pods").lists == 2))
    assert watcher.stats.of("pods").gone == 1
    fake_kube.client.create(make_pod("after", cpu="100m", node_name="node-0"))
    await converged(cache, fake_kube)


async def test_a_relist_writes_only_what_changed(fake_kube: FakeKube, feed: Feed) -> None:
    created = populate(fake_kube)
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await converged(cache, fake_kube)
    await fake_kube.watching("pods")
    gen = await feed.store.generation()
    # a new term relists everything; with nothing changed it writes nothing
    await feed.stop()
    watcher = await feed.start()
    await eventually(lambda: _ready(watcher.stats.synced and watcher.stats.of("podgroups").lists == 1))
    await fake_kube.watching("pods")
    assert await feed.store.generation() == gen

    # while no watcher runs (leader gone), objects vanish and change; the next term's relist finds out
    await feed.stop()
    fake_kube.client.delete("Pod", "pod-2")
    fake_kube.client.delete("Node", "node-4", namespace=None)
    fake_kube.client.delete("PodGroup", "gang")
    fake_kube.client.bind("pod-8", "node-1")
    before = (await cache.refresh()).nodes
    await feed.start()
    snap = await converged(cache, fake_kube)
    assert "default/gang" not in snap.podgroups
    assert snap.nodes.get("node-4") is None or snap.nodes["node-4"].node is None  # its pods keep the name
    untouched = [n for n in ("node-0", "node-3") if before[n].generation == snap.nodes[n].generation]
    assert untouched == ["node-0", "node-3"]  # nodes the relist did not change were not rewritten
    uid2 = next(p["metadata"]["uid"] for p in created if p["metadata"]["name"] == "pod-2")
    assert all(uid2 not in info.pods for info in snap.nodes.values())


async def test_relist_keeps_assumed_reservations(fake_kube: FakeKube, feed: Feed) -> None:
    created = populate(fake_kube, nodes=2, pods=4)
    cache = SnapshotCache(feed.store)
    await feed.start()
    snap = await converged(cache, fake_kube)
    pending_uid = next(p["metadata"]["uid"] for p in created if not p["spec"].get("nodeName"))
    assert (await feed.store.assume_pod(snap.pending[pending_uid], "node-1", None, ttl=30)).ok
    await feed.stop()
    await feed.start()  # a new term relists: the pod is still unbound in the API, the reservation stays
    await eventually(lambda: _ready(feed.watcher is not None and feed.watcher.stats.synced))
    snap = await cache.refresh()
    assert snap.nodes["node-1"].pods[pending_uid].assumed


async def test_connection_errors_back_off_and_recover(fake_kube: FakeKube, feed: Feed) -> None:
    populate(fake_kube, nodes=2, pods=4)
    fake_kube.client.add_fault(500, match="GET /api/v1/pods?limit=", count=3)  # the watcher's paged list only
    cache = SnapshotCache(feed.store)
    watcher = await feed.start()
    await converged(cache, fake_kube)
    assert watcher.stats.of("pods").errors == 3


async def test_without_the_podgroup_crd(
    fake_kube_factory: StartFakeKube, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    fake = fake_kube_factory(podgroups=False)
    http = build_http_client("on", url=fake.url, token=fake.token)  # explicit URL + token
    assert http is not None
    kube = KubeClient(http)
    feed = Feed(kube, Store(redis_async, redis_prefix))
    try:
        assert not await kube.has_podgroups()
        fake.client.create(make_node("n1"))
        watcher = await feed.start()
        await eventually(feed.store.synced)
        assert "podgroups" not in watcher.stats.resources
    finally:
        await feed.stop()
        await kube.aclose()


async def test_bind_pod_outcomes(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_node("n2"))
    pod = fake_kube.client.create(make_pod("p"))
    uid = pod["metadata"]["uid"]
    assert await kube.has_podgroups()
    mismatch = await kube.bind_pod("default", "p", "not-the-uid", "n1")
    assert mismatch.status is BindStatus.UID_MISMATCH and not mismatch.ok
    bound = await kube.bind_pod("default", "p", uid, "n1")
    assert bound.status is BindStatus.BOUND and bound.ok
    again = await kube.bind_pod("default", "p", uid, "n1")
    assert again.status is BindStatus.ALREADY_BOUND and again.ok
    elsewhere = await kube.bind_pod("default", "p", uid, "n2")
    assert elsewhere.status is BindStatus.BOUND_ELSEWHERE and elsewhere.node == "n1"
    missing = await kube.bind_pod("default", "nope", "x", "n1")
    assert missing.status is BindStatus.NOT_FOUND
    got = await kube.get_pod("default", "p")
    assert got is not None and got["spec"]["nodeName"] == "n1"
    assert await kube.get_pod("default", "nope") is None
    fake_kube.client.create(make_podgroup("g", min_member=2))
    group = await kube.get(f"/apis/{PODGROUP_GROUP_VERSION}/namespaces/default/podgroups/g")
    assert group is not None and group["spec"]["minMember"] == 2
