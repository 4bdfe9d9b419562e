"""A filter answered on the replica's last read of the snapshot, when that read is recent enough: what
it saves (the read), what bounds it (the age limit, the next read it starts) and what always reads."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aredis
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from devstack.metrics import samples_by
from extenders.gang.config import LEGACY_MIN_LABEL, LEGACY_NAME_LABEL
from extenders.sync.store import Op, Store
from tests.gang_support import apply
from tests.http.test_verbs import node, pod
from tests.store.helpers import pod as stored_pod

NAMES = ["age-0", "age-1"]


class Cluster:
    """The store as the watch leader writes it: pods placed on and taken off the nodes."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.redis_url, self.prefix = redis_url, prefix

    def _apply(self, ops: list[Op]) -> None:
        async def run() -> None:
            client = aredis.Redis.from_url(self.redis_url)
            try:
                await apply(Store(client, self.prefix), ops)
            finally:
                await client.aclose()

        asyncio.run(run())

    def place(self, uid: str, node_name: str, cpu: int) -> None:
        self._apply([Op.pod(stored_pod(uid, node_name, cpu=cpu))])

    def pend(self, uid: str, namespace: str, labels: dict[str, str]) -> None:
        self._apply([Op.pod(dataclasses.replace(stored_pod(uid), namespace=namespace, labels=labels))])

    def remove(self, uid: str) -> None:
        self._apply([Op.delete_pod(uid)])


def _client(redis_url: str, redis_prefix: str, max_age_ms: float) -> TestClient:
    settings = Settings(
        redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off", filter_snapshot_max_age_ms=max_age_ms
    )
    return TestClient(create_app(settings))


def _seeded(client: TestClient) -> None:
    items = [node(name, cpu="4") for name in NAMES]
    assert client.post("/filter", json={"Pod": pod("age-seed"), "Nodes": {"items": items}}).status_code == 200


@pytest.fixture
def cluster(redis_url: str, redis_prefix: str) -> Cluster:
    return Cluster(redis_url, redis_prefix)


@pytest.fixture
def held(redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    """A replica whose filters may answer on a read up to a second old (long enough for any test step)."""
    with _client(redis_url, redis_prefix, 1000) as client:
        _seeded(client)
        yield client


def sources(client: TestClient) -> dict[str, float]:
    return samples_by(client.get("/metrics").text, "extender_filter_snapshots_total", "source")


def passing(client: TestClient, incoming: dict[str, Any]) -> list[str]:
    answer = client.post("/filter", json={"Pod": incoming, "NodeNames": NAMES})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["Error"] == ""
    return list(body["NodeNames"] or [])


def settled(client: TestClient, incoming: dict[str, Any], want: list[str], seconds: float = 3.0) -> list[str]:
    """The passing nodes once they are ``want`` (the read a held filter started has landed), or the last answer."""
    deadline = time.monotonic() + seconds
    while True:
        got = passing(client, incoming)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_a_filter_soon_after_a_read_answers_on_it_and_starts_the_next(held: TestClient, cluster: Cluster) -> None:
    before = sources(held)
    cluster.place("age-big", "age-0", cpu=3800)  # age-0 has no room left for 500m
    # No read of its own: the answer is the last read's, from before the pod was placed.
    assert passing(held, pod("age-a")) == NAMES
    after = sources(held)
    assert after.get("held", 0) == before.get("held", 0) + 1
    assert after.get("read", 0) == before.get("read", 0)
    # Once the read is older than half the limit, a held filter starts the next: a later one is answered
    # on that, and sees the pod.
    assert settled(held, pod("age-b"), ["age-1"]) == ["age-1"]
    assert sources(held).get("read", 0) == before.get("read", 0)  # every one answered on a held read


def test_a_pod_the_held_read_refuses_everywhere_is_decided_on_a_read_of_its_own(
    held: TestClient, cluster: Cluster
) -> None:
    cluster.place("age-big-0", "age-0", cpu=3800)
    cluster.place("age-big-1", "age-1", cpu=3800)
    assert settled(held, pod("age-c"), []) == []  # both full, as read
    before = sources(held)
    cluster.remove("age-big-1")
    # The held read still has age-1 full; refused everywhere there, the pod is read for again and fits.
    assert passing(held, pod("age-d")) == ["age-1"]
    after = sources(held)
    assert after.get("held_refused", 0) == before.get("held_refused", 0) + 1


def test_a_gang_member_is_filtered_on_a_read_of_its_own(held: TestClient, cluster: Cluster) -> None:
    labels = {LEGACY_NAME_LABEL: "age-g", LEGACY_MIN_LABEL: "2"}
    cluster.pend("age-g-1", "team-a", labels)  # its sibling, pending
    before = sources(held)
    cluster.place("age-big", "age-0", cpu=3800)
    member = pod("age-g-0")
    member["metadata"]["labels"] = labels
    assert passing(held, member) == ["age-1"]
    after = sources(held)
    assert after.get("read", 0) == before.get("read", 0) + 1
    assert after.get("held", 0) == before.get("held", 0)


def test_a_pod_a_gang_label_names_is_filtered_on_a_read_of_its_own_whatever_its_minimum(held: TestClient) -> None:
    """Labelled a gang of one it passes as a plain pod, but its PodGroup, newer than the held read, may
    say otherwise: whether a pod reads depends on its labels only, not on what the read holds."""
    before = sources(held)
    member = pod("age-h-0")
    member["metadata"]["labels"] = {LEGACY_NAME_LABEL: "age-h", LEGACY_MIN_LABEL: "1"}
    assert passing(held, member) == NAMES
    after = sources(held)
    assert after.get("read", 0) == before.get("read", 0) + 1
    assert after.get("held", 0) == before.get("held", 0)


def test_a_read_older_than_the_limit_is_not_answered_on(redis_url: str, redis_prefix: str, cluster: Cluster) -> None:
    with _client(redis_url, redis_prefix, 50) as client:
        _seeded(client)
        time.sleep(0.2)
        cluster.place("age-big", "age-0", cpu=3800)
        time.sleep(0.2)  # the seed's read is four times the limit old
        assert passing(client, pod("age-e")) == ["age-1"]
        assert sources(client).get("held", 0) == 0


def test_with_the_limit_at_zero_every_filter_reads(redis_url: str, redis_prefix: str, cluster: Cluster) -> None:
    with _client(redis_url, redis_prefix, 0) as client:
        _seeded(client)
        for i in range(3):
            cluster.place(f"age-big-{i}", "age-0", cpu=1000)
            room = 4000 - 1000 * (i + 1)
            assert passing(client, pod(f"age-f{i}", cpu=f"{room + 100}m")) == ["age-1"]
        counted = sources(client)
        assert counted.get("held", 0) == 0 and counted.get("read", 0) >= 3
