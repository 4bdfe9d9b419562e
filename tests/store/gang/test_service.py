"""GangService and BindService in-process: three "replicas" (own Redis clients) over one real Redis,
a recording API."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from extenders.sync.convert import pod_info
from extenders.sync.store import Op
from tests.gang_support import GPU, apply, bound_copy, gpu_node, member
from tests.store.gang.replicas import Factory, kube_of, setup, target, wait_for


async def test_gang_of_eight_binds_only_after_the_eighth_arrival(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 8) for i in range(8)]
    await setup(services, kube, [gpu_node("n1", 4), gpu_node("n2", 4)], pods)
    calls = [
        asyncio.create_task(services[i % 3].bind(*target(p, "n1" if i < 4 else "n2"))) for i, p in enumerate(pods[:7])
    ]

    async def seven_held() -> bool:
        status = await services[1].gang_status("default", "g")
        return status is not None and len(status["arrived"]) == 7

    await wait_for(seven_held)
    status = await services[2].gang_status("default", "g")
    assert status is not None
    assert (status["state"], status["minMember"], status["members"], status["bound"]) == ("assembling", 8, 8, 0)
    assert {a["replica"] for a in status["arrived"]} == {"r0", "r1", "r2"}
    assert 0 < status["windowRemainingSeconds"] <= 30
    assert kube.bound == {} and not any(c.done() for c in calls)
    started = time.monotonic()
    last = await services[1].bind(*target(pods[7], "n2"))
    results = await asyncio.wait_for(asyncio.gather(*calls), 3)
    assert last == "" and results == [""] * 7
    assert time.monotonic() - started < 1.0
    assert sorted(kube.bound) == sorted(f"default/g-{i}" for i in range(8))
    status = await services[0].gang_status("default", "g")
    assert status is not None and (status["state"], status["bound"], status["arrived"]) == ("permitted", 8, [])


async def test_incomplete_gang_releases_everything_when_the_window_closes(replicas: Factory) -> None:
    services = await replicas(window_seconds=0.8, cooldown_seconds=5)
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 8) for i in range(8)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    store = services[0].runtime.store
    started = time.monotonic()
    results = await asyncio.gather(*(services[i % 3].bind(*target(p, "n1")) for i, p in enumerate(pods[:7])))
    assert 0.7 < time.monotonic() - started < 3.0
    for error in results:
        assert "gang default/g rejected" in error and "only 7 of the 8 required members" in error
    assert kube.calls == 0 and kube.bound == {}
    assert await store.placed_pods() == {}
    snapshot = await services[2].runtime.snapshot()
    assert snapshot.nodes["n1"].requested.get(GPU, 0) == 0
    status = await services[0].gang_status("default", "g")
    assert status is not None and status["state"] == "cooling" and "only 7 of the 8" in status["reason"]
    verdict = await services[1].filter(pod_info(pods[7]), snapshot, ["n1"])
    assert verdict is not None and not verdict.fit and "cooling down" in verdict.reason


async def test_members_after_the_quorum_bind_at_once(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 2) for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    first = asyncio.create_task(services[0].bind(*target(pods[0], "n1")))
    await asyncio.sleep(0.1)
    assert await services[1].bind(*target(pods[1], "n1")) == ""
    assert await first == ""
    started = time.monotonic()
    assert await services[2].bind(*target(pods[2], "n1")) == ""
    assert time.monotonic() - started < 0.5
    assert len(kube.bound) == 3


async def test_plain_binds_racing_for_the_last_gpu_exactly_one_wins(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    pods = [member(f"p-{i}", None, gpus=1) for i in range(6)]
    await setup(services, kube, [gpu_node("n1", 1)], pods)
    results = await asyncio.gather(*(services[i % 3].bind(*target(p, "n1")) for i, p in enumerate(pods)))
    assert results.count("") == 1
    for error in results:
        assert error == "" or ("no longer fits node n1" in error and f"Insufficient {GPU}" in error)
    assert len(kube.bound) == 1
    winner = next(iter(kube.bound))
    snapshot = await services[0].runtime.snapshot()
    assert [p.key for p in snapshot.nodes["n1"].pods.values()] == [winner]


async def test_plain_bind_is_idempotent_and_reports_the_conflicts(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    pod, other = member("p", None), member("q", None)
    await setup(services, kube, [gpu_node("n1"), gpu_node("n2")], [pod, other])
    store = services[0].runtime.store
    assert await services[0].bind(*target(pod, "n1")) == ""
    assert await services[1].bind(*target(pod, "n1")) == ""  # kube-scheduler's retry
    assert "already bound to node n1" in await services[2].bind(*target(pod, "n2"))
    assert await store.placed_pods() == {pod["metadata"]["uid"]: "n1"}  # the stray retry moved nothing
    ghost = member("ghost", None)
    assert "not found" in await services[0].bind(*target(ghost, "n1"))
    assert "uid" in await services[0].bind("default", "p", "some-other-uid", "n1")
    assert "node nowhere is not in the extender's snapshot" in await services[0].bind(*target(other, "nowhere"))


async def test_filter_reasons_member_count_capacity_and_admission(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    few = [member(f"few-{i}", "few", 4) for i in range(3)]
    big = [member(f"big-{i}", "big", 4, gpus=4) for i in range(4)]
    first = [member(f"a-{i}", "a", 2, created="2024-01-01T00:00:00Z") for i in range(2)]
    second = [member(f"b-{i}", "b", 2, created="2024-01-02T00:00:00Z") for i in range(2)]
    await setup(services, kube, [gpu_node("n1", 8)], few + big + first + second)
    snapshot = await services[0].runtime.snapshot()
    verdict = await services[0].filter(pod_info(few[0]), snapshot, ["n1"])
    assert verdict is not None and not verdict.fit
    assert "gang default/few: only 3 of the 4 required members exist (3 pending" in verdict.reason
    assert verdict.failed_nodes(["n1"]) == {"n1": verdict.reason}
    verdict = await services[0].filter(pod_info(big[0]), snapshot, ["n1"])
    assert verdict is not None and not verdict.fit and f"{GPU} 16 (free 8)" in verdict.reason
    # b asks first and is admitted; a (older) then waits; b completes and a gets the slot.
    ok = await services[1].filter(pod_info(second[0]), snapshot, ["n1"])
    assert ok is not None and ok.fit
    waiting = await services[2].filter(pod_info(first[0]), snapshot, ["n1"])
    assert waiting is not None and not waiting.fit
    assert "gang default/a is waiting to be admitted" in waiting.reason and "default/b" in waiting.reason
    assert "not admitted" in await services[0].bind(*target(first[0], "n1"))
    results = await asyncio.gather(*(services[i].bind(*target(p, "n1")) for i, p in enumerate(second)))
    assert results == ["", ""]
    snapshot = await services[0].runtime.snapshot()
    admitted = await services[2].filter(pod_info(first[0]), snapshot, ["n1"])
    assert admitted is not None and admitted.fit
    assert await services[0].filter(pod_info(member("solo", None)), snapshot, ["n1"]) is None


async def test_a_gang_short_of_room_that_lower_priority_pods_hold_may_preempt(replicas: Factory) -> None:
    (service,) = await replicas(1)
    kube = kube_of(replicas)
    low = member("low", None, gpus=6)
    low["spec"]["priority"] = 10
    high = [member(f"h-{i}", "h", 2, gpus=4) for i in range(2)]
    for pod in high:
        pod["spec"]["priority"] = 1000
    await setup([service], kube, [gpu_node("n1", 8)], [*high, low])
    await apply(service.runtime.store, [Op.pod(bound_copy(low, "n1"))])
    snapshot = await service.runtime.snapshot()
    verdict = await service.filter(pod_info(high[0]), snapshot, ["n1"])
    # 8 GPUs needed, 2 free, 6 held by a pod of lower priority: kube-scheduler may preempt for it.
    assert verdict is not None and not verdict.fit and not verdict.unresolvable
    assert f"{GPU} 8 (free 2)" in verdict.reason
    for pod in high:
        pod["spec"]["priority"] = 5  # now below the pod holding the room: preempting cannot help
    await apply(service.runtime.store, [Op.pod(pod_info(p)) for p in high])
    snapshot = await service.runtime.snapshot()
    verdict = await service.filter(pod_info(high[0]), snapshot, ["n1"])
    assert verdict is not None and not verdict.fit and verdict.unresolvable


async def test_two_gangs_competing_for_one_gangs_capacity_complete_one_after_the_other(replicas: Factory) -> None:
    services = await replicas()
    kube = kube_of(replicas)
    a = [member(f"a-{i}", "a", 4) for i in range(4)]
    b = [member(f"b-{i}", "b", 4) for i in range(4)]
    await setup(services, kube, [gpu_node("n1", 4)], a + b)
    store = services[0].runtime.store
    bound_at: dict[str, float] = {}

    async def scheduler_loop(pod: dict[str, Any], i: int) -> None:
        """A bind retried after every error: the admission order alone must keep the gangs apart."""
        while True:
            if await services[i % 3].bind(*target(pod, "n1")) == "":
                bound_at[pod["metadata"]["name"]] = time.monotonic()
                return
            await asyncio.sleep(0.05)

    interleaved = [p for pair in zip(a, b, strict=True) for p in pair]
    loops = [asyncio.create_task(scheduler_loop(p, i)) for i, p in enumerate(interleaved)]

    async def one_gang_bound() -> bool:
        return len(bound_at) >= 4

    await wait_for(one_gang_bound)
    first = {name[0] for name in bound_at}
    assert len(first) == 1 and len(bound_at) == 4  # one whole gang, none of the other
    winner = a if first == {"a"} else b
    # The winner runs and finishes: its pods go away, the capacity comes back.
    await apply(store, [Op.delete_pod(p["metadata"]["uid"]) for p in winner])
    await asyncio.wait_for(asyncio.gather(*loops), 10)
    assert len(bound_at) == 8
    loser_times = [t for name, t in bound_at.items() if name[0] not in first]
    winner_times = [t for name, t in bound_at.items() if name[0] in first]
    assert min(loser_times) > max(winner_times)


async def test_release_reaches_other_replicas_by_pubsub_long_before_a_poll(replicas: Factory) -> None:
    services = await replicas(poll_interval_seconds=4.0, arrival_lease_seconds=5.0)
    kube = kube_of(replicas)
    pods = [member(f"g-{i}", "g", 3) for i in range(3)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    for s in services:
        await asyncio.wait_for(s.events.connected.wait(), 2)
    held = [asyncio.create_task(services[i].bind(*target(p, "n1"))) for i, p in enumerate(pods[:2])]

    async def two_held() -> bool:
        status = await services[2].gang_status("default", "g")
        return status is not None and len(status["arrived"]) == 2

    await wait_for(two_held)
    await asyncio.sleep(0.1)  # the held calls' first poll is behind them; the next is 4 s away
    started = time.monotonic()
    assert await services[2].bind(*target(pods[2], "n1")) == ""
    assert await asyncio.wait_for(asyncio.gather(*held), 1.0) == ["", ""]
    assert time.monotonic() - started < 0.5
    assert services[0].events.messages > 0 and services[1].events.messages > 0


async def test_polling_still_releases_when_pubsub_messages_are_lost(replicas: Factory) -> None:
    services = await replicas(poll_interval_seconds=0.3)
    kube = kube_of(replicas)
    for s in services:  # no subscriber at all: every message is lost
        s._tasks[0].cancel()
    pods = [member(f"g-{i}", "g", 2) for i in range(2)]
    await setup(services, kube, [gpu_node("n1", 8)], pods)
    held = asyncio.create_task(services[0].bind(*target(pods[0], "n1")))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    assert await services[1].bind(*target(pods[1], "n1")) == ""
    assert await asyncio.wait_for(held, 2.0) == ""
    assert time.monotonic() - started < 1.0
    assert services[0].events.messages == 0
