"""The equivalence cache's shared tier over a real Redis: what one replica computed, another new to
the class takes, only where the nodes are unchanged, and never to a different answer."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aredis

from extenders import engine
from extenders.equivalence import CacheConfig, EquivalenceCache
from extenders.equivalence.shared import SharedConfig, SharedTier
from extenders.model import NodeInfo, PodInfo
from extenders.policy import Policy, default_policy
from extenders.snapshot import Snapshot
from tests.unit.equivalence.test_never_stale import World, _facts, _pod


@dataclasses.dataclass
class Replica:
    cache: EquivalenceCache
    tier: SharedTier

    async def filter(self, policy: Policy, pod: PodInfo, snap: Snapshot, names: list[str]) -> engine.FilterResult:
        memo = self.cache.memo(pod, "filter")
        assert memo is not None
        await self.tier.prepare(memo, "filter", names)
        result = engine.filter_nodes(policy, pod, snap, names, memo)
        self.tier.collect(memo)
        return result

    async def prioritize(
        self, policy: Policy, pod: PodInfo, snap: Snapshot, names: list[str]
    ) -> tuple[list[tuple[str, int]], engine.ScoreCounts]:
        memo = self.cache.memo(pod, "prioritize")
        assert memo is not None
        await self.tier.prepare(memo, "prioritize", names)
        counts = engine.ScoreCounts()
        scores = engine.prioritize_nodes(policy, pod, snap, names, memo, counts)
        self.tier.collect(memo)
        return scores, counts


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aredis.Redis]:
    redis = aredis.Redis.from_url(redis_url)
    yield redis
    await redis.aclose()


def replica(
    client: aredis.Redis, prefix: str, policy: Policy | None = None, config: SharedConfig | None = None
) -> Replica:
    cache = EquivalenceCache(CacheConfig(max_classes=8))
    return Replica(cache, SharedTier(client, prefix, policy or default_policy(), cache, config or SharedConfig()))


def cluster(nodes: int = 12) -> Snapshot:
    rng = random.Random(5)
    table: dict[str, NodeInfo] = {}
    for i in range(nodes):
        facts = _facts(rng, f"n{i}")
        facts.taints, facts.unschedulable, facts.conditions = [], False, {"Ready": "True"}
        table[facts.name] = NodeInfo.build(facts.name, facts, [])
    return Snapshot(nodes=table)


async def warm(source: Replica, pod: PodInfo, snap: Snapshot, names: list[str]) -> None:
    """Two sightings (the class is admitted and stored on the second), then the write."""
    policy = default_policy()
    for _ in range(2):
        await source.filter(policy, pod, snap, names)
        await source.prioritize(policy, pod, snap, names)
    await source.tier.flush()


@dataclasses.dataclass
class Setting:
    """A cluster, a pod whose class replica ``a`` computed and wrote, and replica ``b`` that knows
    Redis lists the class but holds nothing of it."""

    a: Replica
    b: Replica
    snap: Snapshot
    names: list[str]
    pod: PodInfo


async def one_warm_class(client: aredis.Redis, prefix: str, shape: int = 0, b_policy: Policy | None = None) -> Setting:
    a, b = replica(client, prefix), replica(client, prefix, policy=b_policy)
    snap = cluster()
    names = sorted(snap.nodes)
    pod = _pod(random.Random(1), "p1", shape)
    await warm(a, pod, snap, names)
    await b.tier.refresh()
    return Setting(a, b, snap, names, pod)


async def test_a_replica_new_to_a_class_takes_what_another_computed_in_one_fetch(
    client: aredis.Redis, redis_prefix: str
) -> None:
    policy = default_policy()
    setting = await one_warm_class(client, redis_prefix)
    a, b, snap, names, pod = setting.a, setting.b, setting.snap, setting.names, setting.pod
    assert a.tier.stats.written > len(names)

    result = await b.filter(policy, pod, snap, names)
    assert (result.shared, result.computed) == (len(names), 0)
    expected = engine.filter_nodes(policy, pod, snap, names)
    assert (result.passing, result.failed, result.unresolvable) == (
        expected.passing,
        expected.failed,
        expected.unresolvable,
    )
    scores, counts = await b.prioritize(policy, pod, snap, expected.passing)
    assert counts.computed == 0 and counts.shared == counts.reused > 0
    assert scores == engine.prioritize_nodes(policy, pod, snap, expected.passing)
    assert b.tier.stats.fetches == 2  # one per verb
    # held now: the next call of the class answers from memory, without a fetch
    again = await b.filter(policy, _pod(random.Random(2), "p2", 0), snap, names)
    assert (again.reused, again.shared, b.tier.stats.fetches) == (len(names), 0, 2)


async def test_an_entry_for_a_node_changed_since_is_not_taken(client: aredis.Redis, redis_prefix: str) -> None:
    policy = default_policy()
    setting = await one_warm_class(client, redis_prefix, shape=1)  # a node selector: disk=ssd
    b, snap, names, pod = setting.b, setting.snap, setting.names, setting.pod
    nodes = dict(snap.nodes)
    old = nodes["n3"]
    assert old.node is not None
    flipped = "hdd" if old.node.labels["disk"] == "ssd" else "ssd"
    nodes["n3"] = NodeInfo.build("n3", dataclasses.replace(old.node, labels={**old.node.labels, "disk": flipped}), [])
    changed = Snapshot(nodes=nodes)
    result = await b.filter(policy, pod, changed, names)
    assert (result.shared, result.computed) == (len(names) - 1, 1)
    assert ("n3" in result.passing) == (flipped == "ssd")
    assert result.passing == engine.filter_nodes(policy, pod, changed, names).passing


async def test_replicas_with_different_policies_do_not_share(client: aredis.Redis, redis_prefix: str) -> None:
    other = Policy.model_validate({"priorities": [{"name": "LeastRequestedPriority", "weight": 2}]})
    setting = await one_warm_class(client, redis_prefix, b_policy=other)
    result = await setting.b.filter(other, setting.pod, setting.snap, setting.names)
    assert (result.shared, setting.b.tier.stats.fetches) == (0, 0)


async def test_a_class_nobody_stored_costs_no_fetch(client: aredis.Redis, redis_prefix: str) -> None:
    b = replica(client, redis_prefix)
    await b.tier.refresh()
    snap = cluster()
    await b.filter(default_policy(), _pod(random.Random(1), "p1", 0), snap, sorted(snap.nodes))
    assert b.tier.stats.fetches == 0


async def test_redis_keeps_the_most_recent_classes_up_to_the_cap_each_for_the_ttl(
    client: aredis.Redis, redis_prefix: str
) -> None:
    a = replica(client, redis_prefix, config=SharedConfig(max_classes=2, ttl_seconds=30))
    snap = cluster(4)
    names = sorted(snap.nodes)
    pods = [_pod(random.Random(1), f"p{shape}", shape) for shape in (0, 1, 2)]
    for pod in pods:
        await warm(a, pod, snap, names)
        await asyncio.sleep(0.005)  # classes stored in one millisecond tie, and ties go by name
    memo_keys = [a.cache.memo(pod, "filter").key for pod in pods]  # type: ignore[union-attr]
    assert await client.zrange(f"{a.tier.base}:classes", 0, -1) == [key.encode() for key in memo_keys[1:]]
    assert not await client.exists(a.tier.class_key(memo_keys[0]))
    ttl = await client.pttl(a.tier.class_key(memo_keys[2]))
    assert 0 < ttl <= 30_000


async def test_redis_failing_a_fetch_costs_only_the_reuse(
    client: aredis.Redis, redis_prefix: str, unused_tcp_port: int
) -> None:
    policy = default_policy()
    setting = await one_warm_class(client, redis_prefix)
    b, snap, names, pod = setting.b, setting.snap, setting.names, setting.pod
    broken = aredis.Redis(port=unused_tcp_port, socket_connect_timeout=0.5)
    b.tier.redis = broken
    try:
        result = await b.filter(policy, pod, snap, names)
        await b.filter(policy, pod, snap, names)
        await b.tier.flush()  # the entries it computed cannot be written either: dropped, no exception
    finally:
        await broken.aclose()
    assert result.passing == engine.filter_nodes(policy, pod, snap, names).passing
    assert (result.shared, b.tier.stats.errors) == (0, 2)
    assert b.tier.stats.dropped == len(names)


@pytest.mark.parametrize("seed", range(3))
async def test_replicas_sharing_through_redis_answer_as_without_any_cache(
    client: aredis.Redis, redis_prefix: str, seed: int
) -> None:
    """The never-stale property with the shared tier: two replicas over one Redis, each now and then
    losing its memory (a restart), so that answers come from entries the other computed on older
    snapshots; every answer must equal the one computed with no cache."""
    world = World(seed)
    policy = default_policy()
    replicas = [replica(client, redis_prefix), replica(client, redis_prefix)]
    rng = random.Random(seed + 300)
    shared = scores_shared = 0
    for step in range(150):
        what = world.step()
        snap = world.snapshot()
        names = [*snap.nodes, "ghost"]
        rng.shuffle(names)
        for _ in range(3):
            one = rng.choice(replicas)
            if rng.random() < 0.1:
                one.cache.clear()
            pod = _pod(rng, f"in-{step}-{rng.randrange(10**6)}", rng.randrange(12))
            if rng.random() < 0.1:  # a pod filtered again while it sits on a node (assumed there)
                placed = list(snap.nodes[rng.choice(list(snap.nodes))].pods.values())
                if placed:
                    pod = dataclasses.replace(placed[0], node_name="")
            label = f"seed {seed} step {step} after {what}: {pod}"
            fresh = engine.filter_nodes(policy, pod, snap, names)
            cached = await one.filter(policy, pod, snap, names)
            assert (cached.passing, cached.failed, cached.unresolvable) == (
                fresh.passing,
                fresh.failed,
                fresh.unresolvable,
            ), label
            scores, counts = await one.prioritize(policy, pod, snap, fresh.passing)
            assert scores == engine.prioritize_nodes(policy, pod, snap, fresh.passing), label
            shared += cached.shared
            scores_shared += counts.shared
        for each in replicas:
            await each.tier.flush()
            await each.tier.refresh()
    assert shared > 100 and scores_shared > 100, "entries from the other replica should have answered a share"
