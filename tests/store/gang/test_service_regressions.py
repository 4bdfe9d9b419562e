"""GangService and BindService in-process, regressions: each test is a sequence that once went wrong."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aredis

from extenders.sync.convert import pod_info
from extenders.sync.store import Op, Store
from tests.gang_support import GPU, LocalRuntime, RecordingKube, apply, gpu_node, member, seed
from tests.store.gang.replicas import Factory, kube_of, setup, target, wait_for
from tests.waiting import eventually


async def test_a_member_deleted_while_held_answers_an_error_and_stops_counting(replicas: Factory) -> None:
    services = await replicas(window_seconds=10)
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 2) for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    doomed = asyncio.create_task(services[0].bind(*target(pods[0], "n1")))

    async def held() -> bool:
        status = await services[1].gang_status("default", "g")
        return status is not None and len(status["arrived"]) == 1

    await wait_for(held)
    await apply(store, [Op.delete_pod(pods[0]["metadata"]["uid"])])  # the watch sees it deleted
    error = await asyncio.wait_for(doomed, 2.0)
    assert "is gone" in error and "deleted" in error
    replacement = asyncio.create_task(services[1].bind(*target(pods[1], "n1")))
    await asyncio.sleep(0.3)
    assert not replacement.done() and kube.bound == {}  # one live member of two: still held
    assert await services[2].bind(*target(pods[2], "n1")) == ""
    assert await asyncio.wait_for(replacement, 2.0) == ""
    assert sorted(kube.bound) == ["default/g-1", "default/g-2"]


async def test_a_restarted_job_does_not_bind_its_new_pods_one_at_a_time(replicas: Factory) -> None:
    services = await replicas(window_seconds=0.6, cooldown_seconds=5)
    kube = kube_of(replicas)
    old = [member(f"old-{i}", "g", 2) for i in range(2)]
    new = [member(f"new-{i}", "g", 2) for i in range(2)]
    await setup(services, kube, [gpu_node("n1", 8)], old)
    store = services[0].runtime.store
    assert await asyncio.gather(*(services[i].bind(*target(p, "n1")) for i, p in enumerate(old))) == ["", ""]
    # The job restarts: the watch sees the old pods bound and terminating, and the new pods.
    gone = []
    for p in old:
        info = pod_info(p)
        info.node_name, info.phase, info.deletion_timestamp = "n1", "Running", "2024-01-01T00:10:00Z"
        gone.append(Op.pod(info))
    for p in new:
        kube.add(p)
    await apply(store, [*gone, *(Op.pod(pod_info(p)) for p in new)])
    error = await services[1].bind(*target(new[0], "n1"))
    assert "gang default/g rejected" in error and "only 1 of the 2 required members" in error
    assert "default/new-0" not in kube.bound


async def test_binder_with_no_cas_retries_still_tries_once(redis_async: aredis.Redis, redis_prefix: str) -> None:
    from extenders.binding.binder import Binder

    store = Store(redis_async, redis_prefix)
    pod = member("p", None)
    await seed(store, [gpu_node("n1")], [pod])
    binder = Binder(LocalRuntime(store), cas_retries=0)
    checked = await binder.reserve(pod_info(pod), "n1", 30)
    assert checked.error == "" and await store.placed_pods() == {pod["metadata"]["uid"]: "n1"}


async def test_reserve_tries_the_callers_snapshot_first_and_a_stale_one_costs_a_retry_not_a_wrong_answer(
    redis_async: aredis.Redis, redis_prefix: str
) -> None:
    from extenders.binding.binder import Binder

    store = Store(redis_async, redis_prefix)
    first, second, third = member("p1", None, gpus=1), member("p2", None, gpus=1), member("p3", None, gpus=1)
    await seed(store, [gpu_node("n1", 2)], [first, second, third])
    runtime = LocalRuntime(store)
    binder = Binder(runtime)
    current = await runtime.snapshot()
    refreshes = runtime.cache.stats.refreshes
    checked = await binder.reserve(pod_info(first), "n1", 30, current)
    assert checked.error == "" and runtime.cache.stats.refreshes == refreshes  # no catch-up: it was current
    # ``current`` no longer shows p1's reservation: the CAS refuses it and a fresh look reserves p2.
    checked = await binder.reserve(pod_info(second), "n1", 30, current)
    assert checked.error == "" and runtime.cache.stats.refreshes > refreshes
    assert await store.placed_pods() == {p["metadata"]["uid"]: "n1" for p in (first, second)}
    # Stale the other way: it says two GPUs are free; the fresh look says none, and p3 is refused.
    checked = await binder.reserve(pod_info(third), "n1", 30, current)
    assert "no longer fits node n1" in checked.error and f"Insufficient {GPU}" in checked.error
    # And a refusal on an old snapshot is looked at again: after p2 is forgotten, p3 fits although the
    # snapshot handed in (read when both were reserved) says it does not.
    full = await runtime.snapshot()
    await store.forget_pod(second["metadata"]["uid"], "n1")
    checked = await binder.reserve(pod_info(third), "n1", 30, full)
    assert checked.error == ""
    assert set(await store.placed_pods()) == {first["metadata"]["uid"], third["metadata"]["uid"]}


async def test_a_reservation_lost_while_queued_for_an_api_slot_is_not_bound(
    redis_async: aredis.Redis, redis_prefix: str
) -> None:
    from extenders.binding.binder import Binder, BindTarget

    class SlowKube(RecordingKube):
        async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> Any:
            await asyncio.sleep(0.3)
            return await super().bind_pod(namespace, name, uid, node)

    store = Store(redis_async, redis_prefix)
    first, second, third = member("p1", None), member("p2", None), member("p3", None)
    kube = SlowKube()
    for p in (first, second, third):
        kube.add(p)
    await seed(store, [gpu_node("n1")], [first, second, third])
    binder = Binder(LocalRuntime(store, kube), assumed_ttl_seconds=0.6, api_concurrency=1)  # type: ignore[arg-type]
    calls = [asyncio.create_task(binder.bind(BindTarget(*target(p, "n1")))) for p in (first, second, third)]
    uids = {p["metadata"]["uid"] for p in (first, second, third)}

    async def all_reserved() -> bool:
        return uids <= set(await store.assumed_pods())

    await eventually(all_reserved, 0.3)  # all three reserved; the first holds the only API slot
    await store.forget_pod(third["metadata"]["uid"])  # its reservation expires while it queues
    results = await asyncio.gather(*calls)
    assert results[:2] == ["", ""]
    assert "expired while waiting for an API slot" in results[2]
    assert "default/p3" not in kube.bound
    # The second queued past a third of the TTL: its reservation was pushed out before binding.
    deadlines = await store.assumed_pods()
    assert deadlines[second["metadata"]["uid"]] > deadlines[first["metadata"]["uid"]] + 200


async def test_members_on_their_way_to_bind_are_not_counted_as_still_needed(replicas: Factory) -> None:
    """kube-scheduler filters the next member before the previous member's bind reaches us: its
    node list already leaves out the node it assumed that member on. Admitted, the gang passes."""
    services = await replicas()
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 4, gpus=4) for i in range(4)]
    nodes = [gpu_node(f"n{i}", 4) for i in range(4)]
    await setup(services, kube, nodes, pods)
    snapshot = await services[0].runtime.snapshot()
    names = [f"n{i}" for i in range(4)]
    for i, pod in enumerate(pods):
        verdict = await services[i % 3].filter(pod_info(pod), snapshot, names[i:])
        assert verdict is not None and verdict.fit, verdict
    # Not admitted, the same count of nodes would have been too few.
    other = [member(f"o-{i}", "o", 4, gpus=4) for i in range(4)]
    await setup(services, kube, [], other)
    snapshot = await services[0].runtime.snapshot()
    verdict = await services[0].filter(pod_info(other[0]), snapshot, names[1:])
    assert verdict is not None and not verdict.fit and "cannot fit: the 4 more member(s)" in verdict.reason


async def test_parked_members_are_requeued_through_the_api_when_their_gang_may_go(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    first = member("g-0", "g", 2)
    await setup(services, kube, [gpu_node("n1", 8)], [first])
    snapshot = await services[0].runtime.snapshot()
    verdict = await services[0].filter(pod_info(first), snapshot, ["n1"])
    assert verdict is not None and "only 1 of the 2 required members exist" in verdict.reason
    second = member("g-1", "g", 2)
    await setup(services, kube, [], [second])
    snapshot = await services[1].runtime.snapshot()
    verdict = await services[1].filter(pod_info(second), snapshot, ["n1"])
    assert verdict is not None and verdict.fit

    async def requeued() -> bool:
        return kube.requeued == ["default/g-0"]

    await wait_for(requeued, 3)
    annotations = kube.pods[("default", "g-0")]["metadata"]["annotations"]
    assert "kube-gang-extender/requeued-at" in annotations
    registries = [s.runtime.telemetry.registry for s in services]
    assert sum(r.get_sample_value("extender_requeues_total", {"reason": "gang"}) or 0 for r in registries) == 1


async def test_filtering_a_held_member_again_drops_its_orphaned_reservation(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 3) for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    held = asyncio.create_task(services[0].bind(*target(pods[0], "n1")))

    async def reserved() -> bool:
        return pods[0]["metadata"]["uid"] in await store.placed_pods()

    await wait_for(reserved)
    snapshot = await services[1].runtime.snapshot()
    info = pod_info(pods[0])
    assert await services[1].release_orphan(info, snapshot)
    assert await store.placed_pods() == {}
    assert "is gone" in await asyncio.wait_for(held, 5)  # the held call learns its arrival is gone
    assert not await services[1].release_orphan(info, await services[1].runtime.snapshot())
    assert kube.bound == {}
