"""The reconciler against a real Redis: gang bookkeeping follows the pods (extenders/gang/reconcile.py).

In-process replicas hold real bind calls; the pods' deletions and changes are written as the
watcher writes them, and the reconciler's pass is run by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson

from extenders.gang.reconcile import GangReconciler
from extenders.model import PodGroupInfo
from extenders.snapshot import Snapshot
from extenders.sync.convert import pod_info, podgroup_info
from extenders.sync.kinds import PODGROUPS
from extenders.sync.store import Op
from tests.gang_support import GANG_LABEL, RecordingKube, apply, gpu_node, member
from tests.store.gang.replicas import Factory, Replica, kube_of, setup, target
from tests.waiting import eventually


async def held(service: Replica, gang: str, count: int) -> None:
    async def check() -> bool:
        status = await service.gang_status("default", gang)
        return status is not None and len(status["arrived"]) == count

    await eventually(check, 5)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def gang_keys(service: Replica, gang: str) -> list[str]:
    """Every Redis key, set or sorted-set entry that still names the gang."""
    redis, prefix = service.gangs.redis, service.runtime.store.prefix
    keys = [text(k) for k in await redis.keys(f"{prefix}:*{gang}*")]
    for name in ("gangs", "gangq", "gangasm", "gangnudge"):
        if await redis.zscore(f"{prefix}:{name}", gang) is not None:
            keys.append(f"{prefix}:{name}[{gang}]")
    if await redis.sismember(f"{prefix}:gangactive", gang):
        keys.append(f"{prefix}:gangactive[{gang}]")
    return keys


async def journal(service: Replica) -> list[dict[str, str]]:
    entries: Any = await service.gangs.redis.xrange(f"{service.runtime.store.prefix}:gangjournal")
    return [{text(k): text(v) for k, v in fields.items()} for _, fields in entries]


async def requeued(kube: RecordingKube, *names: str) -> None:
    """Every pod of ``names`` was requeued in kube-scheduler (through the nudger)."""

    async def check() -> bool:
        return set(names) <= set(kube.requeued)

    await eventually(check, 5)


async def admits(service: Replica, pod: dict[str, Any], snapshot: Snapshot) -> bool:
    verdict = await service.filter(pod_info(pod), snapshot, ["n1"])
    assert verdict is not None
    return verdict.fit


def podgroup(name: str, minimum: int) -> PodGroupInfo:
    return podgroup_info({"metadata": {"namespace": "default", "name": name}, "spec": {"minMember": minimum}})


def grouped(name: str, group: str) -> dict[str, Any]:
    """A member whose minimum comes from its PodGroup alone (no annotation)."""
    return member(name, group)


@dataclass
class Behind:
    """Gang a (3 members) assembling with some held at bind, gang b queued behind it."""

    services: list[Replica]
    kube: RecordingKube
    a: list[dict[str, Any]]
    b: list[dict[str, Any]]
    calls: list[asyncio.Task[str]]


async def assembling_with_one_behind(replicas: Factory, held_members: int) -> Behind:
    services = await replicas(2)
    kube = kube_of(replicas)
    a = [member(f"a-{i}", "a", 3) for i in range(3)]
    b = [member(f"b-{i}", "b", 2, created="2024-01-02T00:00:00Z") for i in range(2)]
    await setup(services, kube, [gpu_node("n1", 8)], a + b)
    snap = await services[0].runtime.snapshot()
    assert await admits(services[0], a[0], snap)
    verdict = await services[1].filter(pod_info(b[0]), snap, ["n1"])
    assert verdict is not None and not verdict.fit and "waiting to be admitted" in verdict.reason
    calls = [asyncio.create_task(services[i % 2].bind(*target(a[i], "n1"))) for i in range(held_members)]
    await held(services[0], "a", held_members)
    return Behind(services, kube, a, b, calls)


async def test_a_cancelled_gang_vanishes_at_once_and_the_gang_queued_behind_it_goes(replicas: Factory) -> None:
    behind = await assembling_with_one_behind(replicas, 1)
    (r0, r1), kube, a, b, (call,) = behind.services, behind.kube, behind.a, behind.b, behind.calls

    await apply(r0.runtime.store, [Op.delete_pod(p["metadata"]["uid"]) for p in a])  # the job is cancelled
    assert await r0.gangs.reconciler.reconcile() == {"default/a": "vanished"}
    assert "is gone" in await asyncio.wait_for(call, 5)
    assert await gang_keys(r0, "default/a") == []
    assert await r0.runtime.store.placed_pods() == {}
    assert await r0.gang_status("default", "a") is None
    # The slot went with it: the gang queued behind is requeued in kube-scheduler and admitted.
    await requeued(kube, "default/b-0")
    assert await admits(r1, b[1], await r1.runtime.snapshot())
    assert [e["kind"] for e in await journal(r0) if e["gang"] == "default/a"] == ["admitted", "vanished"]
    # Nothing left to do: the next pass acts on nothing.
    assert await r0.gangs.reconciler.reconcile() == {}


async def test_a_gang_asked_about_on_a_newer_snapshot_or_an_unseen_pod_is_left_alone(replicas: Factory) -> None:
    (r0,) = await replicas(1)
    kube = kube_of(replicas)
    await setup([r0], kube, [gpu_node("n1", 8)], [])
    old = await r0.runtime.snapshot()
    pods = [member(f"c-{i}", "c", 2) for i in range(2)]
    # A member the replica's snapshot does not have yet is a member all the same.
    verdict = await r0.filter(pod_info(pods[0]), old, ["n1"])
    assert verdict is not None and not verdict.fit
    quick = GangReconciler(r0.gangs.store, r0.runtime.snapshot, r0.gangs.index, 1.0, unseen_grace=0.4)
    assert await quick.reconcile() == {"default/c": "deferred"}

    await setup([r0], kube, [], pods)
    newer = await r0.runtime.snapshot()
    assert newer.generation > old.generation
    await r0.filter(pod_info(pods[1]), newer, ["n1"])
    await asyncio.sleep(0.5)  # the unseen member's grace is over

    async def stale() -> Any:
        return old

    behind = GangReconciler(r0.gangs.store, stale, r0.gangs.index, 1.0, unseen_grace=0.4)
    assert await behind.reconcile() == {"default/c": "deferred"}, "filtered on a newer snapshot than the plan's"
    assert await quick.reconcile() == {}, "the current snapshot has both members"


async def test_a_member_filtered_before_the_watch_wrote_it_holds_its_gang_only_until_written(
    replicas: Factory,
) -> None:
    (r0,) = await replicas(1)
    kube = kube_of(replicas)
    await setup([r0], kube, [gpu_node("n1", 8)], [])
    pods = [member(f"c-{i}", "c", 2) for i in range(2)]
    await r0.filter(pod_info(pods[0]), await r0.runtime.snapshot(), ["n1"])  # not written yet
    assert await r0.gangs.reconciler.reconcile() == {"default/c": "deferred"}
    # Written, then deleted (the job cancelled at once): the snapshot knows, so no grace is waited for.
    await setup([r0], kube, [], pods)
    await apply(r0.runtime.store, [Op.delete_pod(p["metadata"]["uid"]) for p in pods])
    assert await r0.gangs.reconciler.reconcile() == {"default/c": "vanished"}

    async def forgotten() -> bool:  # its parked member's nudge is taken (and the pod found gone)
        return await gang_keys(r0, "default/c") == []

    await eventually(forgotten, 5)


async def test_a_gang_that_loses_a_member_while_others_are_held_stands_down(replicas: Factory) -> None:
    behind = await assembling_with_one_behind(replicas, 2)
    r0, kube, a, calls = behind.services[0], behind.kube, behind.a, behind.calls

    await apply(r0.runtime.store, [Op.delete_pod(a[2]["metadata"]["uid"])])
    assert (await r0.gangs.reconciler.reconcile())["default/a"] == "released"
    for error in await asyncio.wait_for(asyncio.gather(*calls), 5):
        assert "gang default/a stood down: only 2 of the 3 required members exist" in error
    assert not set(await r0.runtime.store.placed_pods()) & {p["metadata"]["uid"] for p in a}
    status = await r0.gang_status("default", "a")
    assert status is not None and (status["state"], status["admitted"], status["arrived"]) == ("waiting", False, [])
    await requeued(kube, "default/b-0")  # the slot is free
    released = [e for e in await journal(r0) if e["gang"] == "default/a" and e["kind"] == "released"]
    assert len(released) == 1 and "only 2 of the 3" in released[0]["why"]
    # Standing down again releases nothing more, and reports nothing more.
    assert (await r0.gangs.reconciler.reconcile()).get("default/a") in (None, "kept")
    assert len([e for e in await journal(r0) if e["kind"] == "released"]) == 1


async def test_a_lowered_podgroup_minimum_permits_the_members_already_held(replicas: Factory) -> None:
    services = await replicas(2)
    kube = kube_of(replicas)
    pods = [grouped(f"t-{i}", "t") for i in range(4)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    await apply(store, [PODGROUPS.upsert(podgroup("t", 4))])
    calls = [asyncio.create_task(services[i % 2].bind(*target(pods[i], "n1"))) for i in range(3)]
    await held(services[0], "t", 3)
    assert kube.bound == {}

    await apply(store, [PODGROUPS.upsert(podgroup("t", 3))])
    assert (await services[0].gangs.reconciler.reconcile())["default/t"] == "permitted"
    assert await asyncio.wait_for(asyncio.gather(*calls), 5) == ["", "", ""]
    assert sorted(kube.bound) == [f"default/t-{i}" for i in range(3)]


async def test_a_raised_podgroup_minimum_above_the_live_members_releases_the_held_ones(replicas: Factory) -> None:
    services = await replicas(2)
    kube = kube_of(replicas)
    pods = [grouped(f"t-{i}", "t") for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    await apply(store, [PODGROUPS.upsert(podgroup("t", 3))])
    calls = [asyncio.create_task(services[i].bind(*target(pods[i], "n1"))) for i in range(2)]
    await held(services[0], "t", 2)

    await apply(store, [PODGROUPS.upsert(podgroup("t", 5))])
    assert (await services[1].gangs.reconciler.reconcile())["default/t"] == "released"
    for error in await asyncio.wait_for(asyncio.gather(*calls), 5):
        assert "only 3 of the 5 required members exist" in error
    assert kube.bound == {} and await store.placed_pods() == {}


async def test_a_deleted_podgroup_releases_its_gang_and_a_new_one_requeues_the_members(replicas: Factory) -> None:
    services = await replicas(2)
    kube = kube_of(replicas)
    pods = [grouped(f"t-{i}", "t") for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    r0 = services[0]
    store = r0.runtime.store
    await apply(store, [PODGROUPS.upsert(podgroup("t", 3))])
    calls = [asyncio.create_task(services[i].bind(*target(pods[i], "n1"))) for i in range(2)]
    await held(r0, "t", 2)

    await apply(store, [PODGROUPS.delete("default/t")])
    assert (await r0.gangs.reconciler.reconcile())["default/t"] == "released"
    for error in await asyncio.wait_for(asyncio.gather(*calls), 5):
        assert "no PodGroup default/t with spec.minMember" in error
    # Its members are turned away now, and parked: a PodGroup created again requeues them.
    snap = await r0.runtime.snapshot()
    for pod in pods:
        assert not await admits(r0, pod, snap)
    kube.requeued.clear()
    await apply(store, [PODGROUPS.upsert(podgroup("t", 3))])
    await r0.gangs.reconciler.reconcile()
    await requeued(kube, *(f"default/t-{i}" for i in range(3)))


async def test_a_held_member_relabelled_out_of_its_gang_loses_its_arrival(replicas: Factory) -> None:
    services = await replicas(2)
    kube = kube_of(replicas)
    pods = [member(f"a-{i}", "a", 3) for i in range(4)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    calls = [asyncio.create_task(services[i].bind(*target(pods[i], "n1"))) for i in range(2)]
    await held(services[0], "a", 2)

    moved = orjson.loads(orjson.dumps(pods[1]))
    moved["metadata"]["labels"][GANG_LABEL] = "other"
    await apply(store, [Op.pod(pod_info(moved))])
    assert (await services[0].gangs.reconciler.reconcile())["default/a"] == "kept"
    assert "is gone" in await asyncio.wait_for(calls[1], 5)
    assert pods[1]["metadata"]["uid"] not in await store.placed_pods()
    status = await services[0].gang_status("default", "a")
    assert status is not None and [a["pod"] for a in status["arrived"]] == ["a-0"]
    assert not calls[0].done()
    calls[0].cancel()
