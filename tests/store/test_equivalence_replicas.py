"""Two replicas sharing one Redis never answer from a stale cache.

A seeded stream of changes goes through the store as the leader and the binder write them (node
adds, updates and deletes; pods placed, removed and relabelled; reservations made and dropped),
and after every change filter and prioritize calls go to one replica or the other: each answers
from its incrementally caught-up snapshot through its equivalence cache, and every answer must
equal the one computed with no cache at all over a snapshot loaded afresh from Redis. Pods with
anti-affinity and topology spread are part of the mix.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from extenders import engine
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.model import PodInfo
from extenders.policy import default_policy
from extenders.sync.cache import SnapshotCache
from extenders.sync.store import Op, Store
from tests.unit.equivalence.test_never_stale import APPS, _facts, _pod


@dataclasses.dataclass
class Replica:
    cache: SnapshotCache
    equivalence: EquivalenceCache


@pytest.fixture
async def replicas(redis_url: str, redis_prefix: str) -> AsyncIterator[list[Replica]]:
    clients = [aredis.Redis.from_url(redis_url) for _ in range(2)]
    yield [
        Replica(SnapshotCache(Store(client, redis_prefix)), EquivalenceCache(CacheConfig(max_classes=8)))
        for client in clients
    ]
    for client in clients:
        await client.aclose()


class Cluster:
    """The changes, made through the store: what the leader's watch and the binder write."""

    def __init__(self, store: Store, epoch: int, seed: int) -> None:
        self.store = store
        self.epoch = epoch
        self.rng = random.Random(seed)
        self.serial = 0
        self.placed: dict[str, PodInfo] = {}  # bound pods by uid
        self.nodes: set[str] = set()
        self.reserved: dict[str, str] = {}  # uid -> node of a reservation

    def uid(self) -> str:
        self.serial += 1
        return f"u{self.serial}"

    async def add_node(self) -> None:
        name = f"n{self.uid()}"
        await self.store.apply(self.epoch, [Op.node(_facts(self.rng, name))])
        self.nodes.add(name)

    async def step(self) -> str:
        rng = self.rng
        kind = rng.randrange(10)
        name = rng.choice(sorted(self.nodes))
        on_node = [p for p in self.placed.values() if p.node_name == name]
        if kind == 0:
            await self.add_node()
            return "node added"
        if kind == 1 and len(self.nodes) > 4:
            await self.store.apply(self.epoch, [Op.delete_node(name)])
            self.nodes.discard(name)
            for pod in on_node:
                del self.placed[pod.uid]
            for uid in [u for u, node in self.reserved.items() if node == name]:
                del self.reserved[uid]  # a deleted node's reservations go with it
            return "node deleted"
        if kind in (2, 3):
            await self.store.apply(self.epoch, [Op.node(_facts(rng, name))])
            return "node updated"
        if kind in (4, 5):
            pod = _pod(rng, self.uid(), rng.randrange(12))
            pod.node_name, pod.phase = name, "Running"
            await self.store.apply(self.epoch, [Op.pod(pod)])
            self.placed[pod.uid] = pod
            return "pod placed"
        if kind == 6 and on_node:
            gone = rng.choice(on_node)
            await self.store.apply(self.epoch, [Op.delete_pod(gone.uid)])
            del self.placed[gone.uid]
            return "pod removed"
        if kind == 7 and on_node:
            pod = dataclasses.replace(rng.choice(on_node), labels={"app": rng.choice(APPS)})
            await self.store.apply(self.epoch, [Op.pod(pod)])
            self.placed[pod.uid] = pod
            return "pod relabelled"
        if kind == 8:  # a bind's reservation (an assumed pod), as the binder makes it
            pod = _pod(rng, self.uid(), rng.randrange(12))
            await self.store.apply(self.epoch, [Op.pod(pod)])  # pending first, as the watch writes it
            result = await self.store.assume_pod(pod, name, await self.store.node_generation(name), 60)
            if result.ok:
                self.reserved[pod.uid] = name
            return "pod reserved"
        if self.reserved:
            uid = rng.choice(sorted(self.reserved))
            await self.store.forget_pod(uid, self.reserved.pop(uid))
            return "reservation dropped"
        return "nothing"


@pytest.mark.parametrize("seed", range(3))
async def test_two_replicas_answer_from_their_caches_as_without_them(
    store: Store, epoch: int, replicas: list[Replica], seed: int
) -> None:
    policy = default_policy()
    cluster = Cluster(store, epoch, seed)
    for _ in range(10):
        await cluster.add_node()
    rng = random.Random(seed + 7)
    reused = scores_reused = 0
    for step in range(120):
        what = await cluster.step()
        truth = await SnapshotCache(store).refresh()  # loaded in full: no incremental state at all
        names = sorted(truth.nodes)
        for _ in range(4):
            replica = rng.choice(replicas)
            snap = await replica.cache.refresh()
            assert snap.generation == truth.generation
            pod = _pod(rng, f"in-{step}-{rng.randrange(10**6)}", rng.randrange(12))
            if cluster.reserved and rng.random() < 0.2:  # a pod asked about again while its reservation stands
                uid = rng.choice(sorted(cluster.reserved))
                pod = dataclasses.replace(snap.nodes[cluster.reserved[uid]].pods[uid], node_name="")
            label = f"seed {seed} step {step} after {what}: {pod.uid} {pod.labels}"
            view = engine.without_own_reservation(snap, pod, names)
            cached = engine.filter_nodes(policy, pod, view, names, replica.equivalence.memo(pod, "filter"))
            expected = engine.filter_nodes(policy, pod, engine.without_own_reservation(truth, pod, names), names)
            assert (cached.passing, cached.failed, cached.unresolvable) == (
                expected.passing,
                expected.failed,
                expected.unresolvable,
            ), label
            counts = engine.ScoreCounts()
            memo = replica.equivalence.memo(pod, "prioritize")
            scores = engine.prioritize_nodes(policy, pod, view, expected.passing, memo, counts)
            truth_view = engine.without_own_reservation(truth, pod, names)
            assert scores == engine.prioritize_nodes(policy, pod, truth_view, expected.passing), label
            reused += cached.reused
            scores_reused += counts.reused
    assert reused > 500 and scores_reused > 500, "both caches should have answered a good share"
