"""The watcher under hostile answers: RBAC denying PodGroups, malformed objects, watches that end at
once, a node deleted while requests still carry stale copies of it, and writes that lag."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.aio import cancel_and_wait
from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client
from extenders.kube.requeue import REFUSAL_WINDOW_SECONDS, REQUEUE_ANNOTATION
from extenders.sync.cache import SnapshotCache
from extenders.sync.convert import node_facts
from extenders.sync.kinds import PODGROUPS
from extenders.sync.store import Store
from extenders.sync.watcher import Watcher
from tests.fake_kube.builders import (
    make_namespace,
    make_node,
    make_pod,
    make_podgroup,
    make_pvc,
    make_service,
    make_workload,
)
from tests.plugins.fake_kube import FakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubeClient]:
    http = build_http_client("on", url=fake_kube.url, token=fake_kube.token)
    assert http is not None
    client = KubeClient(http)
    yield client
    await client.aclose()


@pytest.fixture
async def store(redis_async: aredis.Redis, redis_prefix: str) -> Store:
    return Store(redis_async, redis_prefix)


async def start(kube: KubeClient, store: Store, **kw: Any) -> tuple[Watcher, asyncio.Task[None]]:
    attempt = await store.acquire_lease("test#0", 60)
    assert attempt.lease is not None
    kw.setdefault("backoff_initial", 0.05)
    kw.setdefault("backoff_max", 0.5)
    watcher = Watcher(kube, store, attempt.lease.epoch, **kw)
    return watcher, asyncio.create_task(watcher.run())


async def test_podgroups_forbidden_by_rbac_still_watches_nodes_and_pods(
    fake_kube: FakeKube, kube: KubeClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_pod("p1", cpu="100m", node_name="n1"))
    fake_kube.client.create(make_podgroup("gang", min_member=2))
    fake_kube.client.add_fault(403, match="podgroups", count=None, message="podgroups is forbidden")
    caplog.set_level(logging.WARNING, logger="extenders.sync.watcher")
    watcher, task = await start(kube, store, optional_recheck_seconds=0.2)
    try:
        await eventually(store.synced)
        snap = await SnapshotCache(store).refresh()
        assert snap.nodes["n1"].node is not None and len(snap.nodes["n1"].pods) == 1
        assert "podgroups" not in watcher.stats.resources
        await asyncio.sleep(0.5)  # a few re-checks, still denied: warned once, not per re-check
        assert sum("podgroups not readable" in r.getMessage() for r in caplog.records) == 1
        # RBAC fixed later: the periodic re-check starts the PodGroup watch
        fake_kube.client.clear_faults()
        await eventually(lambda: store.record(PODGROUPS, "default/gang"))
        assert not task.done()
    finally:
        await cancel_and_wait(task)


async def test_namespaces_and_claims_forbidden_by_rbac_still_sync_and_are_watched_once_granted(
    fake_kube: FakeKube, kube: KubeClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_namespace("team-a", {"team": "a"}))
    fake_kube.client.create(make_pvc("solo", "team-a", ["ReadWriteOncePod"]))
    fake_kube.client.add_fault(403, match="/api/v1/namespaces?", count=None, message="namespaces is forbidden")
    fake_kube.client.add_fault(403, match="/api/v1/persistentvolumeclaims", count=None, message="pvcs is forbidden")
    caplog.set_level(logging.WARNING, logger="extenders.sync.watcher")
    watcher, task = await start(kube, store, optional_recheck_seconds=0.2)
    try:
        await eventually(store.synced)  # nodes, pods and PDBs are enough to be synced
        snap = await SnapshotCache(store).refresh()
        assert snap.nodes["n1"].node is not None and snap.namespaces == {} and snap.pvcs == {}
        assert "namespaces" not in watcher.stats.resources and "persistentvolumeclaims" not in watcher.stats.resources
        await asyncio.sleep(0.5)  # a few re-checks, still denied: warned once each
        messages = [r.getMessage() for r in caplog.records]
        assert sum("namespaces not readable" in m for m in messages) == 1, messages
        assert sum("persistentvolumeclaims not readable" in m for m in messages) == 1, messages
        fake_kube.client.clear_faults()
        cache = SnapshotCache(store)

        async def granted() -> bool:
            snap = await cache.refresh()
            return "team-a" in snap.namespaces and "team-a/solo" in snap.pvcs

        await eventually(granted)
        assert not task.done()
    finally:
        await cancel_and_wait(task)


async def test_services_and_replicasets_denied_still_sync_and_are_watched_once_granted(
    fake_kube: FakeKube, kube: KubeClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kube.client.create(make_node("n1"))
    fake_kube.client.create(make_service("web", "shop", {"app": "web"}))
    fake_kube.client.create(make_workload("ReplicaSet", "web-1", "shop", {"matchLabels": {"app": "web"}}))
    fake_kube.client.create(make_workload("StatefulSet", "db", "shop"))
    fake_kube.client.add_fault(401, match="/api/v1/services", count=None, message="Unauthorized")
    fake_kube.client.add_fault(403, match="/apis/apps/v1/replicasets", count=None, message="forbidden")
    caplog.set_level(logging.WARNING, logger="extenders.sync.watcher")
    watcher, task = await start(kube, store, optional_recheck_seconds=0.2)
    try:
        await eventually(store.synced)
        cache = SnapshotCache(store)

        async def statefulsets_only() -> bool:
            snap = await cache.refresh()
            return "shop/db" in snap.stateful_sets and not snap.services and not snap.replica_sets

        await eventually(statefulsets_only)  # the one granted is watched meanwhile
        assert "services" not in watcher.stats.resources and "replicasets" not in watcher.stats.resources
        await asyncio.sleep(0.5)
        messages = [r.getMessage() for r in caplog.records]
        assert sum("services not readable" in m for m in messages) == 1, messages
        assert sum("replicasets not readable" in m for m in messages) == 1, messages
        fake_kube.client.clear_faults()

        async def granted() -> bool:
            snap = await cache.refresh()
            return "shop/web" in snap.services and "shop/web-1" in snap.replica_sets

        await eventually(granted)
        assert not task.done()
    finally:
        await cancel_and_wait(task)


async def test_a_malformed_object_is_skipped_not_a_crash(
    fake_kube: FakeKube, kube: KubeClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kube.client.create(make_node("n1"))
    bad = make_node("bad-node")
    bad["spec"]["taints"] = ["not-a-taint"]  # conversion raises AttributeError
    fake_kube.client.create(bad)
    caplog.set_level(logging.WARNING, logger="extenders.sync.watcher")
    watcher, task = await start(kube, store)
    try:
        await eventually(store.synced)
        # a malformed pod arriving through the watch
        broken = make_pod("broken", cpu="100m", node_name="n1")
        broken["spec"]["containers"] = ["not-a-container"]
        fake_kube.client.create(broken)
        fake_kube.client.create(make_pod("fine", cpu="100m", node_name="n1"))
        cache = SnapshotCache(store)

        async def fine_seen() -> bool:
            snap = await cache.refresh()
            return "n1" in snap.nodes and {p.name for p in snap.nodes["n1"].pods.values()} == {"fine"}

        await eventually(fine_seen)
        assert "bad-node" not in (await cache.refresh()).nodes
        assert not task.done()
        # no restart, no relist: one list per resource
        assert watcher.stats.of("nodes").lists == 1 and watcher.stats.of("pods").lists == 1
        messages = [r.getMessage() for r in caplog.records]
        assert any("nodes bad-node skipped" in m for m in messages), messages
        assert any("pods default/broken skipped" in m for m in messages), messages
    finally:
        await cancel_and_wait(task)


class InstantlyEndingWatches(KubeClient):
    """A proxy that answers every watch with an empty 200 and closes it straight away."""

    def __init__(self, inner: KubeClient) -> None:
        super().__init__(inner.http)
        self.watches = 0

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        for _ in ():
            yield {}


async def test_watches_ending_at_once_back_off(fake_kube: FakeKube, kube: KubeClient, store: Store) -> None:
    fake_kube.client.create(make_node("n1"))
    proxy = InstantlyEndingWatches(kube)
    _, task = await start(proxy, store, backoff_initial=0.05, backoff_max=0.4)
    try:
        await eventually(store.synced)
        before = proxy.watches
        await asyncio.sleep(1.5)
        # 10 resources; a hot loop would make thousands of watch calls, a backoff capped at
        # 0.4 s (with jitter, at least 0.2 s) a few per resource
        assert 10 <= proxy.watches - before <= 10 * 10, proxy.watches - before
        assert not task.done()
    finally:
        await cancel_and_wait(task)


async def test_a_node_deleted_in_the_watch_is_not_revived_by_a_stale_request(
    fake_kube: FakeKube, kube: KubeClient, store: Store
) -> None:
    created = fake_kube.client.create(make_node("n1"))
    _, task = await start(kube, store)
    try:
        await eventually(store.synced)
        stale = node_facts(created)
        fake_kube.client.delete("Node", "n1", namespace=None)

        async def gone() -> bool:
            return (await store.read_node("n1"))[0] is None

        await eventually(gone)
        # kube-scheduler's cache still has the node and sends it with a filter request
        assert not await store.refresh_node_if_newer(stale)
        assert (await store.read_node("n1"))[0] is None
    finally:
        await cancel_and_wait(task)


async def test_a_refusal_while_the_watcher_held_an_event_unwritten_is_handed_back_however_long_it_held_it(
    fake_kube: FakeKube, kube: KubeClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher lags (a slow write holds the events read behind it): a pod refused after the
    deletion was read, but before it was written, was judged without it, even when the write lands
    later than the refusal window."""
    client = fake_kube.client
    client.create(make_node("n1"))
    client.create(make_pod("big", cpu="3", node_name="n1"))
    waiting = client.create(make_pod("waiting", cpu="3"))
    watcher, task = await start(kube, store)
    real = store.apply_and_take_refused
    stall = asyncio.Event()
    windows: list[float | None] = []

    async def slow(epoch: int, ops: Any, window: float | None = None, interval: float = 10.0) -> Any:
        ops = list(ops)
        if any(op.code == "P" and op.id == slow_uid for op in ops):
            stall.set()
            await asyncio.sleep(REFUSAL_WINDOW_SECONDS + 1.0)
        windows.append(window)
        return await real(epoch, ops, window, interval)

    try:
        await eventually(store.synced)
        await fake_kube.watching("pods")
        monkeypatch.setattr(store, "apply_and_take_refused", slow)
        slow_uid = client.create(make_pod("slow", cpu="1"))["metadata"]["uid"]
        await asyncio.wait_for(stall.wait(), 10)
        client.delete("Pod", "big")  # read while the write before it stalls
        await asyncio.sleep(0.3)
        refused_on = await store.generation()  # a filter's snapshot: big still there
        assert not await store.record_refusal(
            waiting["metadata"]["uid"], "default/waiting", refused_on, REFUSAL_WINDOW_SECONDS
        )

        async def stamp() -> str | None:
            return (client.get("Pod", "waiting")["metadata"].get("annotations") or {}).get(REQUEUE_ANNOTATION)

        async def counted_once() -> bool:  # counted when the patch returns, after the stamp shows
            return watcher.requeuer.requeued >= 1

        await eventually(stamp, timeout=10)
        await eventually(counted_once, timeout=5)
        assert max(w or 0.0 for w in windows) > REFUSAL_WINDOW_SECONDS + 0.5  # the hold counted
        assert watcher.requeuer.requeued == 1
        counted = {"reason": "refused_before_change"}
        assert watcher.telemetry.registry.get_sample_value("extender_requeues_total", counted) == 1
    finally:
        await cancel_and_wait(task)
