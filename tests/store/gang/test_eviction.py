"""Gangs preempted whole, against a real Redis: the extender evicts a gang's other members once
kube-scheduler has evicted its victims on the node it picked, and never when it picked none."""

from __future__ import annotations

import asyncio

from extenders.gang.eviction import GangEviction
from extenders.sync.store import Op
from tests.gang_support import apply, bound_copy, gpu_node, member
from tests.store.gang.replicas import Factory, kube_of, setup


def eviction(until_trigger: str, *members: str) -> GangEviction:
    return GangEviction(
        "default/a", "n1", "default/high", (until_trigger,), tuple((m, f"default/{m}") for m in members)
    )


async def test_the_rest_of_a_gang_goes_once_kube_scheduler_evicted_its_victim(replicas: Factory) -> None:
    (r0,) = await replicas(1)
    kube = kube_of(replicas)
    pods = [member(f"a-{i}", "a", 3, uid=f"a-{i}") for i in range(3)]
    await setup([r0], kube, [gpu_node("n1"), gpu_node("n2")], [])
    for pod in pods:
        kube.add(pod)
    store = r0.runtime.store
    await apply(store, [Op.pod(bound_copy(pods[0], "n1")), *(Op.pod(bound_copy(p, "n2")) for p in pods[1:])])
    gangs = r0.gangs
    assert gangs.evictor is not None
    await gangs.evictions.record([eviction("a-0", "a-1", "a-2")])
    assert await gangs.evictor.evict_due() == []  # kube-scheduler has not evicted a-0 yet
    await apply(store, [Op.delete_pod("a-0")])
    assert await gangs.evictor.evict_due() == ["default/a"]
    assert sorted(kube.preempted) == ["default/a-1", "default/a-2"]
    assert await gangs.evictions.pending() == []
    assert r0.runtime.telemetry.gang_preemptions._value.get() == 1
    recorded = sorted((reason, name) for kind, _ns, name, _type, reason in r0.runtime.events._series if kind == "Pod")
    assert recorded == [("Preempted", "a-1"), ("Preempted", "a-2")]


async def test_a_record_whose_victim_kube_scheduler_never_evicted_expires_unused(replicas: Factory) -> None:
    (r0,) = await replicas(1)
    kube = kube_of(replicas)
    pods = [member(f"a-{i}", "a", 2, uid=f"a-{i}") for i in range(2)]
    await setup([r0], kube, [gpu_node("n1")], [])
    for pod in pods:
        kube.add(pod)
    await apply(r0.runtime.store, [Op.pod(bound_copy(p, "n1")) for p in pods])
    gangs = r0.gangs
    assert gangs.evictor is not None
    await gangs.evictions.record([eviction("a-0", "a-1")], seconds=0.1)
    await asyncio.sleep(0.2)
    assert await gangs.evictor.evict_due() == []
    assert kube.preempted == [] and await gangs.evictions.pending() == []
