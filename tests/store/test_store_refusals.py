"""Pods filter refused just before the snapshot caught up with a change kube-scheduler acted on.

kube-scheduler retries a parked pod when a pod is deleted or a node changes; its informer may see
that event a little before the leader's watcher has written it, and the retry is then judged on
the older snapshot and refused again. The watcher's write hands such refusals back to requeue.
"""

from __future__ import annotations

import asyncio

from extenders.sync.store import AssumeStatus, Op, Store
from tests.store.helpers import node, pod

WINDOW = 0.5


async def test_a_batch_that_frees_capacity_hands_back_the_recent_refusals_once(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1")), Op.pod(pod("waiting"))])
    assert not await store.record_refusal("waiting", "default/waiting", await store.generation(), WINDOW)
    # A pending pod's update frees nothing: no requeue.
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("other"))], WINDOW)
    assert refused == []
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy")], WINDOW)
    assert refused == [("waiting", "default/waiting")]
    # Another pod goes with no refusal since: one refusal, one requeue.
    await store.apply(epoch, [Op.pod(pod("busy2", "n1"))])
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy2")], WINDOW, interval=5)
    assert refused == []


async def test_a_pod_refused_again_after_its_requeue_is_handed_back_by_the_next_change(
    store: Store, epoch: int
) -> None:
    """kube-scheduler's retry after our requeue is refused on a snapshot still behind the deletion it
    saw; when the watcher writes the deletion, within the interval, the pod must be requeued again:
    nothing else would move it before kube-scheduler's five-minute flush."""
    await store.apply(epoch, [Op.node(node("n1")), *(Op.pod(pod(f"busy{i}", "n1")) for i in range(3))])
    await store.apply(epoch, [Op.pod(pod("waiting"))])
    assert not await store.record_refusal("waiting", "default/waiting", await store.generation(), WINDOW)
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy0")], WINDOW, interval=5)
    assert refused == [("waiting", "default/waiting")]
    lagging = await store.generation()  # kube-scheduler saw busy1 go; our watcher has not written it
    assert not await store.record_refusal("waiting", "default/waiting", lagging, WINDOW, interval=5)
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy1")], WINDOW, interval=5)
    assert refused == [("waiting", "default/waiting")]
    # The pod's second requeue counts like the first: another change, no refusal since, no requeue.
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy2")], WINDOW, interval=5)
    assert refused == []


async def test_node_changes_hand_refusals_back_but_heartbeats_do_not(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1", rv="1"))])
    assert not await store.record_refusal("p", "default/p", await store.generation(), WINDOW)
    _, refused = await store.apply_and_take_refused(epoch, [Op.node(node("n1", rv="2"))], WINDOW)
    assert refused == []  # same facts, a new resourceVersion: kube-scheduler retries nothing either
    _, refused = await store.apply_and_take_refused(epoch, [Op.node(node("n1", rv="3", cpu=8000))], WINDOW)
    assert refused == [("p", "default/p")]


async def test_refusals_older_than_the_window_are_not_handed_back(store: Store, epoch: int) -> None:
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1"))])
    await store.record_refusal("old", "default/old", await store.generation(), WINDOW)
    await asyncio.sleep(WINDOW + 0.1)
    await store.record_refusal("new", "default/new", await store.generation(), WINDOW)
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy")], WINDOW)
    assert refused == [("new", "default/new")]
    assert await store.redis.zcard(store.key("refused")) == 0
    assert await store.redis.hlen(store.key("refusedpod")) == 0


async def test_refusals_are_kept_for_a_write_whose_window_covers_the_time_its_watcher_held_an_event(
    store: Store, epoch: int
) -> None:
    """A lagging watcher widens its write's window to when it read the event; later refusals of other
    pods must not have dropped the early one meanwhile."""
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1"))])
    keep = 30.0
    await store.record_refusal("early", "default/early", await store.generation(), keep)
    await asyncio.sleep(WINDOW + 0.1)
    await store.record_refusal("late", "default/late", await store.generation(), keep)
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("placed", "n1"))], WINDOW)
    assert refused == [("late", "default/late")]  # the usual window
    await store.record_refusal("late", "default/late", await store.generation(), keep)
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy")], 2 * WINDOW + 0.2)
    assert sorted(refused) == [("early", "default/early"), ("late", "default/late")]


async def test_a_refusal_judged_before_a_change_that_already_landed_is_requeued_at_once(
    store: Store, epoch: int
) -> None:
    """The filter read its snapshot, then the watcher wrote the deletion, then the refusal arrives."""
    seen = await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1"))])
    await store.apply(epoch, [Op.delete_pod("busy")])
    assert await store.record_refusal("p", "default/p", seen, WINDOW, interval=5)
    assert await store.redis.zcard(store.key("refused")) == 0  # requeued now: nothing to hand back later
    # Judged on a snapshot that had the change: an ordinary refusal, nothing to requeue.
    assert not await store.record_refusal("q", "default/q", await store.generation(), WINDOW)
    assert await store.redis.zcard(store.key("refused")) == 1


async def test_a_stale_refusal_within_the_interval_waits_for_the_next_change(store: Store, epoch: int) -> None:
    """Requeued at once no more than once per interval: a second stale refusal soon after is kept, and
    the watcher's next change hands it back."""
    seen = await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1")), Op.pod(pod("busy2", "n1"))])
    await store.apply(epoch, [Op.delete_pod("busy")])
    assert await store.record_refusal("p", "default/p", seen, WINDOW, interval=5)
    assert not await store.record_refusal("p", "default/p", seen, WINDOW, interval=5)
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("other"))], WINDOW, interval=5)
    assert refused == []  # a pending pod's update: not a change kube-scheduler retries on
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy2")], WINDOW, interval=5)
    assert refused == [("p", "default/p")]


async def test_a_stale_refusal_after_a_requeue_is_requeued_at_once_when_a_change_landed_since_that_requeue(
    store: Store, epoch: int
) -> None:
    """Requeued, then retried by kube-scheduler on a deletion: the filter reads its snapshot, the
    watcher writes the deletion (no refusal of the pod to hand back yet), then the refusal arrives.
    No later change may come, so it is requeued at once, within the interval or not."""
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("busy", "n1")), Op.pod(pod("busy2", "n1"))])
    assert not await store.record_refusal("p", "default/p", await store.generation(), WINDOW, interval=5)
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy")], WINDOW, interval=5)
    assert refused == [("p", "default/p")]
    await asyncio.sleep(0.01)  # the requeue and the next change a millisecond apart at least
    seen = await store.generation()
    _, refused = await store.apply_and_take_refused(epoch, [Op.delete_pod("busy2")], WINDOW, interval=5)
    assert refused == []
    assert await store.record_refusal("p", "default/p", seen, WINDOW, interval=5)
    # Judged behind the same change again (the replica's read lagged): that change has had its requeue.
    assert not await store.record_refusal("p", "default/p", seen, WINDOW, interval=5)


async def test_a_pod_placed_hands_refusals_back_and_an_unchanged_one_does_not(store: Store, epoch: int) -> None:
    """kube-scheduler counts the pod it is binding at once and filters the next pod before that
    bind reaches us: a spread or affinity refusal of those milliseconds is judged without it."""
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("first", "n1"))])
    assert not await store.record_refusal("p", "default/p", await store.generation(), WINDOW, interval=0.001)
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("first", "n1"))], WINDOW)
    assert refused == []  # the same pod again (a status update): nothing placed
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("second", "n1"))], WINDOW)
    assert refused == [("p", "default/p")]


async def test_confirming_a_reservation_hands_refusals_back(store: Store, epoch: int) -> None:
    """Our bind reserved the pod; the watch confirming it is when kube-scheduler's retry could pass."""
    await store.apply(epoch, [Op.node(node("n1")), Op.pod(pod("b"))])
    assert (await store.assume_pod(pod("b"), "n1")).status is AssumeStatus.ASSUMED
    assert not await store.record_refusal("p", "default/p", await store.generation(), WINDOW)
    _, refused = await store.apply_and_take_refused(epoch, [Op.pod(pod("b", "n1"))], WINDOW)
    assert refused == [("p", "default/p")]
