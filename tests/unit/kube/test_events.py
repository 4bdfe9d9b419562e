"""The Event recorder: repeats aggregate into one Event, busy objects and the API are rate-limited."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from extenders.aio import cancel_and_wait
from extenders.kube.client import KubeClient
from extenders.kube.events import NORMAL, WARNING, EventLimits, EventRecorder, ObjectRef
from extenders.telemetry import Telemetry
from tests.waiting import eventually


class FakeEventsApi:
    """Records the Event calls the recorder makes; ``expired`` names Events whose PATCH finds them gone."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.expired: set[str] = set()

    async def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        assert event["metadata"]["namespace"] == namespace
        self.created.append(event)

    async def patch_event(self, namespace: str, name: str, changes: dict[str, Any]) -> bool:
        if name in self.expired:
            return False
        self.patches.append((name, changes))
        return True


POD = ObjectRef.pod("ns", "p-0", "uid-0")


def recorder(api: FakeEventsApi, **limits: Any) -> EventRecorder:
    return EventRecorder(cast(KubeClient, api), Telemetry(), instance="r1", limits=EventLimits(**limits))


def written(rec: EventRecorder, result: str) -> float:
    return float(rec.telemetry.kube_events.labels(result)._value.get())


async def test_repeats_become_one_event_whose_count_and_message_follow() -> None:
    api = FakeEventsApi()
    rec = recorder(api, repeat_flush_seconds=0.2)
    rec.start()
    try:
        rec.record(POD, NORMAL, "GangWaiting", "only 1 of 4")

        async def created() -> bool:
            return len(api.created) == 1

        await eventually(created)
        for n in (2, 3):
            rec.record(POD, NORMAL, "GangWaiting", f"only {n} of 4")

        async def patched() -> bool:
            return bool(api.patches)

        await eventually(patched)
        await asyncio.sleep(0.3)
    finally:
        await rec.stop()
    event = api.created[0]
    assert event["involvedObject"] == {
        "kind": "Pod",
        "namespace": "ns",
        "name": "p-0",
        "uid": "uid-0",
        "apiVersion": "v1",
    }
    assert (event["type"], event["reason"], event["count"]) == ("Normal", "GangWaiting", 1)
    assert event["source"] == {"component": "kube-gang-extender"} and event["reportingInstance"] == "r1"
    assert event["metadata"]["name"].startswith("p-0.")
    # Both repeats arrived within one flush interval: one PATCH carries them.
    assert len(api.patches) == 1
    name, changes = api.patches[0]
    assert name == event["metadata"]["name"]
    assert changes["count"] == 3 and changes["message"] == "only 3 of 4"
    assert written(rec, "created") == 1 and written(rec, "updated") == 1


async def test_a_busy_object_gets_only_its_burst_of_distinct_events() -> None:
    api = FakeEventsApi()
    rec = recorder(api, per_object_burst=3, per_object_refill_seconds=3600)
    for i in range(5):
        rec.record(POD, WARNING, f"Reason{i}", "x")
    rec.record(ObjectRef.pod("ns", "other", "uid-1"), WARNING, "Reason0", "x")
    task = asyncio.create_task(rec.run())
    try:

        async def four() -> bool:
            return len(api.created) == 4

        await eventually(four)
    finally:
        await cancel_and_wait(task)
    assert sorted((e["involvedObject"]["name"], e["reason"]) for e in api.created) == [
        ("other", "Reason0"),
        ("p-0", "Reason0"),
        ("p-0", "Reason1"),
        ("p-0", "Reason2"),
    ]
    assert written(rec, "dropped") == 2


async def test_writes_are_capped_at_the_configured_rate() -> None:
    api = FakeEventsApi()
    rec = recorder(api, qps=20, burst=5, per_object_burst=100)
    for i in range(15):
        rec.record(ObjectRef.pod("ns", f"p-{i}", f"u{i}"), NORMAL, "GangAdmitted", "x")
    task = asyncio.create_task(rec.run())
    try:
        await asyncio.sleep(0.2)
        early = len(api.created)

        async def all_written() -> bool:
            return len(api.created) == 15

        await eventually(all_written)
    finally:
        await cancel_and_wait(task)
    # A burst of 5 and 20/s: about 9 by 0.2 s, never all 15.
    assert 5 <= early <= 10


async def test_an_expired_event_is_created_again_under_a_new_name() -> None:
    api = FakeEventsApi()
    rec = recorder(api, repeat_flush_seconds=0.0)
    task = asyncio.create_task(rec.run())
    try:
        rec.record(POD, WARNING, "BindFailed", "first")

        async def created(n: int) -> bool:
            return len(api.created) == n

        await eventually(lambda: created(1))
        api.expired.add(api.created[0]["metadata"]["name"])
        rec.record(POD, WARNING, "BindFailed", "again")
        await eventually(lambda: created(2))
    finally:
        await cancel_and_wait(task)
    assert api.created[1]["metadata"]["name"] != api.created[0]["metadata"]["name"]
    assert api.created[1]["count"] == 2 and api.created[1]["message"] == "again"


def test_without_an_api_server_nothing_is_kept() -> None:
    rec = EventRecorder(None)
    rec.record(POD, NORMAL, "GangWaiting", "x")
    assert rec._series == {}
