"""A kind added the documented way (its dataclass, converter, codec and one row in the kinds table)
travels the whole path: the watcher lists and watches it, the store keeps its records and tombstones,
and every replica's snapshot carries it, incrementally and on a full load."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aredis

from extenders.aio import cancel_and_wait
from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client
from extenders.sync import kinds
from extenders.sync.cache import SnapshotCache
from extenders.sync.records import Column, RecordCodec
from extenders.sync.store import Store
from extenders.sync.watcher import Watcher
from tests.plugins.fake_kube import FakeKube
from tests.waiting import eventually

pytestmark = pytest.mark.integration


@dataclass(slots=True)
class ConfigMapInfo:
    """The throw-away kind's scheduling view: which keys a ConfigMap holds."""

    namespace: str
    name: str
    keys: list[str] = field(default_factory=list)


def config_map_info(obj: Mapping[str, Any]) -> ConfigMapInfo:
    meta = obj.get("metadata") or {}
    return ConfigMapInfo(meta.get("namespace") or "default", meta.get("name") or "", sorted(obj.get("data") or {}))


CONFIG_MAPS = kinds.Kind(
    resource="configmaps",
    path="/api/v1/configmaps",
    hash="cm",
    attr="config_maps",
    codec=RecordCodec(ConfigMapInfo, [Column("k", "keys")]),
    convert=config_map_info,
)


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "team"}, "data": data}


@pytest.fixture
async def kube(fake_kube: FakeKube) -> AsyncIterator[KubeClient]:
    http = build_http_client("on", kubeconfig=str(fake_kube.kubeconfig_path))
    assert http is not None
    client = KubeClient(http)
    yield client
    await client.aclose()


def test_a_kind_row_is_checked_for_a_hash_name_of_its_own() -> None:
    with pytest.raises(ValueError, match="taken"):
        kinds.Kind("x", "/x", "pending", "x", CONFIG_MAPS.codec, config_map_info)
    with pytest.raises(ValueError, match="taken"):
        kinds.Kind("x", "/x", "gangq", "x", CONFIG_MAPS.codec, config_map_info)


async def test_a_kind_added_by_one_row_reaches_every_replica(
    monkeypatch: pytest.MonkeyPatch, fake_kube: FakeKube, kube: KubeClient, redis_async: aredis.Redis, redis_prefix: str
) -> None:
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, CONFIG_MAPS))
    fake_kube.client.create(config_map("listed", a="1", b="2"))
    fake_kube.client.create(config_map("doomed", c="3"))
    store = Store(redis_async, redis_prefix)
    attempt = await store.acquire_lease("test#0", 60)
    assert attempt.lease is not None
    watcher = Watcher(kube, store, attempt.lease.epoch, backoff_initial=0.05, backoff_max=0.5)
    task = asyncio.create_task(watcher.run())
    replica = SnapshotCache(store)
    try:
        await eventually(store.synced)
        assert watcher.stats.of("configmaps").lists == 1
        first = await replica.refresh()
        assert dict(first.objects["config_maps"]) == {
            "team/listed": ConfigMapInfo("team", "listed", ["a", "b"]),
            "team/doomed": ConfigMapInfo("team", "doomed", ["c"]),
        }

        # Through the watch: an update, a delete (a tombstone) and a new object, caught up incrementally.
        fake_kube.client.patch("ConfigMap", "listed", {"data": {"b": None, "z": "9"}}, namespace="team")
        fake_kube.client.delete("ConfigMap", "doomed", namespace="team")
        fake_kube.client.create(config_map("new"))

        async def caught_up() -> dict[str, Any] | None:
            table = dict((await replica.refresh()).objects["config_maps"])
            return (
                table if set(table) == {"team/listed", "team/new"} and table["team/listed"].keys == ["a", "z"] else None
            )

        table = await eventually(caught_up)
        assert table["team/new"] == ConfigMapInfo("team", "new", [])
        assert replica.stats.deltas >= 1 and replica.stats.full_loads == 1
        assert await store.hash_keys("cm") == {"team/listed", "team/new"}
        assert await store.record(CONFIG_MAPS, "team/listed") == ConfigMapInfo("team", "listed", ["a", "z"])
        tomb = await redis_async.zscore(store.key("tombs"), "cm:team/doomed")
        assert tomb is not None

        # Compacted: the tombstone and its generation entry go; a replica loading afresh has the same table.
        await store.compact(int(tomb))
        assert await redis_async.zscore(store.key("cmz"), "team/doomed") is None
        fresh = await SnapshotCache(store).refresh()
        assert dict(fresh.objects["config_maps"]) == table
    finally:
        await cancel_and_wait(task)
