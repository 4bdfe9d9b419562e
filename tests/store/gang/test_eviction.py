"""Gangs preempted whole, against a real Redis: the extender evicts a gang's other members once
kube-scheduler has evicted its victims on the node it picked, and never when it picked none."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from extenders.gang.eviction import PREEMPTOR_SECONDS, RECORD_SECONDS, GangEviction
from extenders.gang.service import GangService
from extenders.sync.convert import pod_info
from extenders.sync.store import Op, Store
from tests.gang_support import RecordingKube, apply, bound_copy, gpu_node, member
from tests.store.gang.replicas import Factory, Replica, kube_of, setup, target


def eviction(until_trigger: str, *members: str, node: str = "n1", minimum: int = 3) -> GangEviction:
    return GangEviction(
        "default/a", node, "default/high", (until_trigger,), tuple((m, f"default/{m}") for m in members), minimum
    )


async def gang_a(
    replicas: Factory, members: int, minimum: int, nodes: list[str]
) -> tuple[Replica, RecordingKube, list[dict[str, Any]]]:
    """One replica over GPU nodes ``nodes``, and gang a's ``members`` pods (minimum ``minimum``) known to the API."""
    (r0,) = await replicas(1)
    kube = kube_of(replicas)
    pods = [member(f"a-{i}", "a", minimum, uid=f"a-{i}") for i in range(members)]
    await setup([r0], kube, [gpu_node(n) for n in nodes], [])
    for pod in pods:
        kube.add(pod)
    return r0, kube, pods


async def a_2_recorded_to_take_a_0(
    replicas: Factory, seconds: float = RECORD_SECONDS
) -> tuple[GangService, RecordingKube, Store, GangEviction]:
    """Gang a (minimum 2 of 3) bound one member per node n0..n2, a-1 since preempted; a preemptor's
    answer took a-2 on n2, its record naming a-0 to follow."""
    r0, kube, pods = await gang_a(replicas, 3, 2, ["n0", "n1", "n2"])
    store = r0.runtime.store
    await apply(store, [Op.pod(bound_copy(p, f"n{i}")) for i, p in enumerate(pods)])
    await apply(store, [Op.delete_pod("a-1")])
    record = eviction("a-2", "a-0", node="n2", minimum=2)
    await r0.gangs.evictions.record([record], seconds=seconds)
    return r0.gangs, kube, store, record


async def test_the_rest_of_a_gang_goes_once_kube_scheduler_evicted_its_victim(replicas: Factory) -> None:
    r0, kube, pods = await gang_a(replicas, 3, 3, ["n1", "n2"])
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
    r0, kube, pods = await gang_a(replicas, 2, 2, ["n1"])
    await apply(r0.runtime.store, [Op.pod(bound_copy(p, "n1")) for p in pods])
    gangs = r0.gangs
    assert gangs.evictor is not None
    await gangs.evictions.record([eviction("a-0", "a-1")], seconds=0.1)
    await asyncio.sleep(0.2)
    assert await gangs.evictor.evict_due() == []
    assert kube.preempted == [] and await gangs.evictions.pending() == []


async def test_records_of_one_gang_on_two_nodes_both_stand_and_the_first_trigger_takes_it_whole(
    replicas: Factory,
) -> None:
    # Two preemptors each take gang a (min 3 of 4) on another node: both records stand; once both
    # victims are gone the rest goes, and both records with it.
    r0, kube, pods = await gang_a(replicas, 4, 3, [f"n{i}" for i in range(4)])
    store = r0.runtime.store
    await apply(store, [Op.pod(bound_copy(p, f"n{i}")) for i, p in enumerate(pods)])
    gangs = r0.gangs
    assert gangs.evictor is not None
    await gangs.evictions.record([eviction("a-0", "a-1", "a-2", "a-3", node="n0")])
    await gangs.evictions.record([eviction("a-1", "a-0", "a-2", "a-3", node="n1")])
    assert len(await gangs.evictions.pending()) == 2
    await apply(store, [Op.delete_pod("a-0")])
    # a-0 gone, but a-1, a-2 and a-3 are left: still the minimum, nothing is evicted yet.
    assert await gangs.evictor.evict_due() == []
    assert len(await gangs.evictions.pending()) == 2
    await apply(store, [Op.delete_pod("a-1")])
    assert await gangs.evictor.evict_due() == ["default/a"]
    assert sorted(kube.preempted) == ["default/a-2", "default/a-3"]
    assert await gangs.evictions.pending() == []


async def test_a_trigger_kube_scheduler_failed_to_evict_goes_once_another_preemption_broke_the_gang(
    replicas: Factory,
) -> None:
    # Gang a (min 2 of 3), one member already preempted. A preemptor's answer takes a-2 on n2 and
    # records a-0 to follow; kube-scheduler's eviction of a-2 fails. A second preemptor, counting a-2
    # as leaving, takes a-0 on n0, records nothing and relies on the first record. a-2 alone is left:
    # the first record takes it.
    gangs, kube, store, first = await a_2_recorded_to_take_a_0(replicas)
    assert gangs.evictor is not None
    assert await gangs.evictor.evict_due() == []
    await gangs.evictions.record([], relied=[first.field])
    assert [e.relied for e, _ in await gangs.evictions.pending()] == [True]
    await apply(store, [Op.delete_pod("a-0")])
    assert await gangs.evictor.evict_due() == ["default/a"]
    assert kube.preempted == ["default/a-2"]
    assert await gangs.evictions.pending() == []
    assert await gangs.evictions.redis.hlen(gangs.evictions.relied_key) == 0


async def test_a_trigger_left_alone_when_members_elsewhere_went_for_no_preemption_relying_on_it(
    replicas: Factory,
) -> None:
    # As above, but a-0 finished on its own and no later answer relied on the record: a-2's eviction is
    # kube-scheduler's to make or not, and the record expires without evicting anything.
    gangs, kube, store, _ = await a_2_recorded_to_take_a_0(replicas, seconds=0.5)
    assert gangs.evictor is not None
    await apply(store, [Op.delete_pod("a-0")])
    assert await gangs.evictor.evict_due() == []
    await asyncio.sleep(0.6)
    assert await gangs.evictor.evict_due() == []
    assert kube.preempted == [] and await gangs.evictions.pending() == []


async def test_a_reliance_mark_that_names_no_record_ends_with_its_deadline_and_an_unreadable_one_at_once(
    replicas: Factory,
) -> None:
    (r0,) = await replicas(1)
    evictions = r0.gangs.evictions
    await evictions.record([], relied=["default/a|n1"], seconds=0.2)
    await evictions.record([], relied=["default/b|n1"], seconds=30)
    await evictions.redis.hset(evictions.relied_key, "default/c|n1", "not a deadline")
    await asyncio.sleep(0.3)
    assert await evictions.pending(tidy=True) == []
    assert await evictions.redis.hkeys(evictions.relied_key) == [b"default/b|n1"]


async def test_a_gang_taken_whole_places_no_more_members_and_those_placed_since_go_with_it(
    replicas: Factory,
) -> None:
    # Gang a (min 2 of 3): a-1 and a-2 bound, a-0 pending. A preemptor takes a-2 on n2, which leaves a
    # below its minimum: a-1 is recorded to follow. Once kube-scheduler has taken a-2, a-0 must not be
    # placed (it would be all that is left of a); if it was placed before that, it goes with a-1.
    r0, kube, pods = await gang_a(replicas, 3, 2, [f"n{i}" for i in range(4)])
    store = r0.runtime.store
    await apply(
        store, [Op.pod(pod_info(pods[0])), Op.pod(bound_copy(pods[1], "n1")), Op.pod(bound_copy(pods[2], "n2"))]
    )
    gangs = r0.gangs
    assert gangs.evictor is not None
    await gangs.evictions.record([eviction("a-2", "a-1", node="n2", minimum=2)])
    pending = pod_info(pods[0])
    before = await gangs.filter(pending, await r0.runtime.snapshot(), ["n3"])
    assert before is None or "preempted whole" not in before.reason  # kube-scheduler may pick another node
    await apply(store, [Op.delete_pod("a-2")])
    after = await gangs.filter(pending, await r0.runtime.snapshot(), ["n3"])
    assert after is not None and not after.fit and after.unresolvable
    assert "default/a is being preempted whole for default/high" in after.reason
    # Its filter passed before the trigger was taken: the bind that follows is refused, nothing is bound.
    refused = await r0.bind(*target(pods[0], "n3"))
    assert "default/a is being preempted whole for default/high" in refused
    assert kube.bound == {}
    # Placed all the same (its filter came first): the evictor takes it with the rest.
    await apply(store, [Op.pod(bound_copy(pods[0], "n3"))])
    assert await gangs.evictor.evict_due() == ["default/a"]
    assert sorted(kube.preempted) == ["default/a-0", "default/a-1"]


async def test_victims_marked_as_preempting_read_back_until_their_mark_ends(replicas: Factory) -> None:
    (r0,) = await replicas(1)
    evictions = r0.gangs.evictions
    await evictions.mark_preempting({"n1": ["u1", "u2"]}, seconds=0.3)
    await evictions.mark_preempting({"n1": ["u3"]}, seconds=5)
    # An answer with several nodes: offered only, a node without victims counted among them.
    await evictions.mark_preempting({"n1": ["o1"], "n2": []}, seconds=0.3)
    await evictions.mark_preempting({"n1": ["o2"], "n2": ["o3"]}, seconds=5)
    marked = await evictions.preempting()
    assert marked == (frozenset({"u1", "u2", "u3"}), frozenset({"u1", "u2", "o1", "u3", "o2", "o3"}), {})
    await asyncio.sleep(0.4)
    assert await evictions.preempting() == (frozenset({"u3"}), frozenset({"u3", "o2", "o3"}), {})
    await evictions.mark_preempting({})  # prunes the ended marks
    assert await evictions.redis.zcard(evictions.preempting_key) == 1
    assert await evictions.redis.zcard(evictions.offered_key) == 3


async def test_each_answer_is_kept_for_its_preemptor_by_node(replicas: Factory) -> None:
    (r0,) = await replicas(1)
    evictions = r0.gangs.evictions
    await evictions.mark_preempting({"n1": ["a"], "n2": ["b"]}, preemptor="p1")
    await evictions.mark_preempting({"n2": ["c"]}, preemptor="p1")  # a later answer for n2
    await evictions.mark_preempting({"n1": ["d"]}, preemptor="p2")
    assert await evictions.victims_for("p1") == {"n1": frozenset({"a"}), "n2": frozenset({"c"})}
    assert await evictions.victims_for("p2") == {"n1": frozenset({"d"})}
    assert await evictions.victims_for("p3") == {}
    assert (await evictions.preempting("p1")).answered == {"n1": frozenset({"a"}), "n2": frozenset({"c"})}
    assert 0 < await evictions.redis.pttl(evictions.preemptor_key("p1")) <= PREEMPTOR_SECONDS * 1000
    await evictions.redis.hset(evictions.preemptor_key("p2"), "n9", b"not json")
    assert await evictions.victims_for("p2") == {"n1": frozenset({"d"})}


async def test_the_leaders_pass_moves_a_record_written_per_gang_under_its_node_and_drops_unreadable_ones(
    replicas: Factory,
) -> None:
    (r0,) = await replicas(1)
    evictions = r0.gangs.evictions
    legacy = {"node": "n1", "by": "default/high", "trigger": ["a-0"], "members": [["a-1", "default/a-1"]], "until": 1}
    await evictions.redis.hset(evictions.key, "default/a", orjson.dumps(legacy))
    await evictions.redis.hset(evictions.key, "default/b|n2", b"not json")
    ((record, until),) = await evictions.pending()  # a plain read (gang filters and binds) writes nothing
    assert (record.gang, record.node, record.minimum, until) == ("default/a", "n1", 1, 1)
    assert sorted(await evictions.redis.hkeys(evictions.key)) == [b"default/a", b"default/b|n2"]
    ((record, until),) = await evictions.pending(tidy=True)  # the leader's pass
    assert (record.gang, record.node, record.minimum, until) == ("default/a", "n1", 1, 1)
    assert await evictions.redis.hkeys(evictions.key) == [b"default/a|n1"]
    await evictions.done(record.field)
    assert await evictions.pending() == []
