"""The gang Lua scripts against a real Redis: quorum, window, leases, withdrawal, what happens after the permit."""

from __future__ import annotations

import asyncio

import orjson

from extenders.gang.state import ArriveStatus, FilterStatus
from extenders.sync.convert import pod_info
from extenders.sync.store import Op, Store
from tests.gang_support import apply, gpu_node, member, seed
from tests.store.gang.scripts import arrive, gangs, pods


async def test_quorum_reserves_each_member_and_permits_on_the_last(store: Store) -> None:
    await seed(store, [gpu_node("n1"), gpu_node("n2")])
    g = gangs(store)
    members = pods("a", 3, 3)
    first = await arrive(g, members[0], "n1", 3)
    second = await arrive(g, members[1], "n2", 3)
    assert (first.status, first.held) == (ArriveStatus.WAIT, 1)
    assert (second.status, second.held) == (ArriveStatus.WAIT, 2)
    assert 4000 < second.ms_left <= 5000
    polled = await g.poll("default/a", [(members[0].uid, "t")])
    assert polled.state == "" and polled.mine == [True]
    last = await arrive(g, members[2], "n1", 3)
    assert last.status is ArriveStatus.PERMITTED
    polled = await g.poll("default/a", [(members[0].uid, "t"), (members[1].uid, "t")])
    assert polled.state == "permitted" and polled.mine == [True, True]
    placed = await store.placed_pods()
    assert placed == {members[0].uid: "n1", members[1].uid: "n2", members[2].uid: "n1"}
    assert set(await store.assumed_pods()) == {m.uid for m in members}


async def test_gang_reservation_is_the_same_record_plain_assume_writes(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    pod = pods("a", 1, 2)[0]
    await arrive(g, pod, "n1", 2)
    via_gang = await store.redis.hget(store.node_key("n1"), pod.uid)
    await store.forget_pod(pod.uid)
    await store.assume_pod(pod, "n1")
    via_store = await store.redis.hget(store.node_key("n1"), pod.uid)
    assert via_gang is not None and via_store is not None
    assert orjson.loads(via_gang) == orjson.loads(via_store)


async def test_members_still_placed_count_toward_the_quorum(store: Store) -> None:
    running = [member(f"a-run-{i}", "a", 3) for i in range(2)]
    for p in running:
        p["spec"]["nodeName"] = "n1"
    await seed(store, [gpu_node("n1")], running)
    g = gangs(store)
    pod = pods("a", 1, 3)[0]
    # A stale snapshot may name a member that is gone by now: only what Redis still places counts.
    first = await arrive(g, pod, "n1", 3, bound=[running[0]["metadata"]["uid"], "deleted-meanwhile"])
    assert (first.status, first.held, first.bound) == (ArriveStatus.WAIT, 1, 1)
    uids = [p["metadata"]["uid"] for p in running]
    again = await arrive(g, pod, "n1", 3, bound=uids)
    assert (again.status, again.held, again.bound) == (ArriveStatus.PERMITTED, 1, 2)


async def test_a_permitted_gang_whose_pods_are_gone_assembles_again(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    old = pods("a", 2, 2)
    for m in old:
        await arrive(g, m, "n1", 2)
    await g.done_many("default/a", [(m.uid, "t", True) for m in old])
    late = pod_info(member("a-late", "a", 2))
    # The gang runs: a late or replacement member binds at once.
    result = await arrive(g, late, "n1", 2, bound=[m.uid for m in old])
    assert result.status is ArriveStatus.PERMITTED
    await g.done("default/a", late.uid, "t", bound=False)
    # The job is deleted and recreated under the same name: its first new pod must wait for the rest.
    for m in old:
        await store.forget_pod(m.uid)
    fresh = pods("a", 2, 2)
    fresh[0].uid, fresh[1].uid = "new-0", "new-1"
    assert (await arrive(g, fresh[0], "n1", 2)).status is ArriveStatus.WAIT
    assert (await arrive(g, fresh[1], "n1", 2)).status is ArriveStatus.PERMITTED


async def test_stale_node_generation_conflicts_and_records_nothing(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    pod = pods("a", 1, 2)[0]
    current = await store.node_generation("n1")
    result = await arrive(g, pod, "n1", 2, expected=current - 1)
    assert result.status is ArriveStatus.CONFLICT and result.generation == current
    assert await store.placed_pods() == {}
    _, records = await g.read(["default/a"])
    assert records[0].arrivals == {}
    ok = await arrive(g, pod, "n1", 2, expected=current)
    assert ok.status is ArriveStatus.WAIT


async def test_window_close_rejects_releases_and_cools_down(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, cooldown_seconds=0.4)
    members = pods("a", 2, 3)
    gen_before = await store.generation()
    for m in members:
        assert (await arrive(g, m, "n1", 3, window=0.2)).status is ArriveStatus.WAIT
    assert len(await store.placed_pods()) == 2
    await asyncio.sleep(0.3)
    polled = await g.poll("default/a", [(members[0].uid, "t")])
    assert polled.state == "rejected"
    assert "only 2 of the 3 required members" in polled.why and "default/a" in polled.why
    assert await store.placed_pods() == {} and await store.assumed_pods() == {}
    assert await store.generation() > gen_before  # replicas see the capacity come back
    cooling = await g.filter("default/a", True, 1000, 3)
    assert cooling.status is FilterStatus.COOLING and 0 < cooling.ms_left <= 400
    retry = await arrive(g, members[0], "n1", 3)
    assert retry.status is ArriveStatus.REJECTED
    await asyncio.sleep(0.45)
    assert (await g.filter("default/a", True, 1000, 3)).status is FilterStatus.ADMITTED


async def test_lapsed_arrivals_are_dropped_with_their_reservations(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, arrival_lease_seconds=0.2)
    members = pods("a", 3, 3)
    await arrive(g, members[0], "n1", 3, token="dead")
    await arrive(g, members[1], "n1", 3, token="alive")
    for _ in range(4):  # the live call keeps refreshing; the dead replica's never does
        await asyncio.sleep(0.08)
        await g.poll("default/a", [(members[1].uid, "alive")])
    polled = await g.poll("default/a", [(members[0].uid, "dead"), (members[1].uid, "alive")])
    assert polled.mine == [False, True]
    assert await store.placed_pods() == {members[1].uid: "n1"}
    # A retried member still completes the gang once enough are there again.
    assert (await arrive(g, members[0], "n1", 3)).status is ArriveStatus.WAIT
    assert (await arrive(g, members[2], "n1", 3)).status is ArriveStatus.PERMITTED


async def test_all_arrivals_lapsing_leaves_nothing_reserved(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, arrival_lease_seconds=0.15)
    for m in pods("a", 2, 3):
        await arrive(g, m, "n1", 3)
    await asyncio.sleep(0.25)
    assert await g.sweep() == []
    assert await store.placed_pods() == {}
    _, records = await g.read(["default/a"])
    assert records[0].arrivals == {} and "deadline" not in records[0].fields


async def test_newer_call_for_the_same_pod_supersedes_the_old_one(store: Store) -> None:
    await seed(store, [gpu_node("n1"), gpu_node("n2")])
    g = gangs(store)
    pod = pods("a", 1, 2)[0]
    first = await arrive(g, pod, "n1", 2, token="old")
    second = await arrive(g, pod, "n2", 2, token="new")
    assert first.replaced == "" and second.replaced == "old (w)"  # what the log reports
    assert (await arrive(g, pod, "n2", 2, token="new")).replaced == ""  # the same call again replaces nothing
    polled = await g.poll("default/a", [(pod.uid, "old"), (pod.uid, "new")])
    assert polled.mine == [False, True]
    assert await store.placed_pods() == {pod.uid: "n2"}
    assert not await g.done("default/a", pod.uid, "old", bound=False)  # the old call cannot undo the new
    assert await store.placed_pods() == {pod.uid: "n2"}


async def test_done_marks_bound_or_withdraws(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a, b = pods("a", 2, 2)
    await arrive(g, a, "n1", 2)
    assert await g.done("default/a", a.uid, "t", bound=False)
    assert await store.placed_pods() == {}
    await arrive(g, a, "n1", 2)
    assert (await arrive(g, b, "n1", 2)).status is ArriveStatus.PERMITTED
    assert await g.done("default/a", a.uid, "t", bound=True)
    _, records = await g.read(["default/a"])
    assert records[0].arrivals[a.uid]["st"] == "b"
    assert records[0].fields["state"] == "permitted"


async def test_withdraw_takes_a_held_arrival_back_but_not_once_the_gang_is_permitted(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a, b, c = pods("a", 3, 2)
    await arrive(g, a, "n1", 2)
    assert await g.withdraw("default/a", a.uid, "t")  # held, gang assembling: taken back
    assert await store.placed_pods() == {}
    _, records = await g.read(["default/a"])
    assert a.uid not in records[0].arrivals
    assert await g.withdraw("default/a", a.uid, "t")  # nothing left to take back: still not refused
    await arrive(g, a, "n1", 2)
    assert (await arrive(g, b, "n1", 2)).status is ArriveStatus.PERMITTED
    assert not await g.withdraw("default/a", a.uid, "t")  # permitted: refused, the member must bind
    _, records = await g.read(["default/a"])
    assert a.uid in records[0].arrivals
    assert set(await store.placed_pods()) == {a.uid, b.uid}
    assert (await arrive(g, c, "n1", 2)).status is ArriveStatus.PERMITTED  # late member binds at once
    # A superseded call (other token) owns nothing: not refused (it must not bind), and nothing changes.
    assert await g.withdraw("default/a", c.uid, "other-token")
    _, records = await g.read(["default/a"])
    assert c.uid in records[0].arrivals


async def test_a_slow_bind_after_the_permit_keeps_its_reservation(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, arrival_lease_seconds=0.15)
    members = pods("a", 2, 2)
    await arrive(g, members[0], "n1", 2)
    assert (await arrive(g, members[1], "n1", 2)).status is ArriveStatus.PERMITTED
    await asyncio.sleep(0.25)  # longer than the lease: the API server is slow to take the Bindings
    await g.sweep()
    polled = await g.poll("default/a", [(m.uid, "t") for m in members])
    assert polled.state == "permitted" and polled.mine == [True, True]
    assert set(await store.placed_pods()) == {m.uid for m in members}
    deadlines = await store.assumed_pods()
    assert await g.done_many("default/a", [(m.uid, "t", True) for m in members]) == [True, True]
    assert all(v > deadlines[k] for k, v in (await store.assumed_pods()).items())  # now waiting for the watch


# --- regressions ----------------------------------------------------------------------------------


async def test_a_member_deleted_while_held_no_longer_counts_toward_the_quorum(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a, b, c = pods("a", 3, 2)
    assert (await arrive(g, a, "n1", 2, token="ta")).status is ArriveStatus.WAIT
    await apply(store, [Op.delete_pod(a.uid)])  # the watch sees a deleted: its reservation goes
    polled = await g.poll("default/a", [(a.uid, "ta")])
    assert polled.mine == [False]  # its held call is told it lost the arrival
    _, records = await g.read(["default/a"])
    assert a.uid not in records[0].arrivals
    assert await store.redis.zscore(f"{store.prefix}:ganglease:default/a", a.uid) is None
    # The replacement alone is one live member of two: it waits; a second live one completes it.
    replacement = await arrive(g, b, "n1", 2, token="tb")
    assert (replacement.status, replacement.held, replacement.bound) == (ArriveStatus.WAIT, 1, 0)
    assert (await arrive(g, c, "n1", 2, token="tc")).status is ArriveStatus.PERMITTED
    assert set(await store.placed_pods()) == {b.uid, c.uid}


async def test_a_held_member_deleted_before_the_next_arrival_is_dropped_by_it(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a, b = pods("a", 2, 2)
    await arrive(g, a, "n1", 2, token="ta")
    await apply(store, [Op.delete_pod(a.uid)])
    # Nobody polled in between: the arrival itself must not count the dead member.
    assert (await arrive(g, b, "n1", 2, token="tb")).status is ArriveStatus.WAIT


async def test_a_restarted_job_assembles_again_despite_its_terminating_bound_pods(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    old = pods("a", 2, 2)
    await arrive(g, old[0], "n1", 2, token="t0")
    assert (await arrive(g, old[1], "n1", 2, token="t1")).status is ArriveStatus.PERMITTED
    await g.done_many("default/a", [(old[0].uid, "t0", True), (old[1].uid, "t1", True)])
    # The watch sees the old pods bound, then terminating (job restart); they stay placed meanwhile.
    for p in old:
        p.node_name = "n1"
        p.deletion_timestamp = "2024-01-01T00:10:00Z"
    await apply(store, [Op.pod(p) for p in old])
    assert set(await store.placed_pods()) == {p.uid for p in old}
    new = pods("a", 2, 2)
    # The caller's snapshot lists no live placed member: the old pods terminate.
    first = await arrive(g, new[0], "n1", 2, token="n0", bound=[])
    assert (first.status, first.held, first.bound) == (ArriveStatus.WAIT, 1, 0)
    assert (await arrive(g, new[1], "n1", 2, token="n1", bound=[])).status is ArriveStatus.PERMITTED


async def test_members_binding_after_the_permit_count_before_any_snapshot_shows_them(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store)
    a, b, late = pods("a", 3, 2)
    await arrive(g, a, "n1", 2, token="ta")
    assert (await arrive(g, b, "n1", 2, token="tb")).status is ArriveStatus.PERMITTED
    # a and b are binding right now ('w' arrivals): a late member joins the running gang at once.
    result = await arrive(g, late, "n1", 2, token="tl", bound=[])
    assert (result.status, result.bound) == (ArriveStatus.PERMITTED, 2)


async def test_the_permit_extends_every_held_reservation_to_the_assumed_ttl(store: Store) -> None:
    await seed(store, [gpu_node("n1")])
    g = gangs(store, arrival_lease_seconds=0.1, assumed_ttl_seconds=30.0)  # hold ttl 0.3 s
    a, b, late = pods("a", 3, 2)
    await arrive(g, a, "n1", 2, token="ta")
    before = (await store.assumed_pods())[a.uid]
    assert (await arrive(g, b, "n1", 2, token="tb")).status is ArriveStatus.PERMITTED
    await arrive(g, late, "n1", 2, token="tl", bound=[a.uid, b.uid])
    deadlines = await store.assumed_pods()
    assert deadlines[a.uid] > before + 25_000
    assert deadlines[b.uid] > before + 25_000 and deadlines[late.uid] > before + 25_000
    # Members queueing for API slots outlive the hold TTL without losing their reservations.
    await asyncio.sleep(0.4)
    assert await store.expire_assumed() == []
    assert set(await store.placed_pods()) == {a.uid, b.uid, late.uid}
