"""The ``GET /v1/gangs`` document of a gang (extenders/gang/status.py)."""

from __future__ import annotations

from extenders.gang.membership import GangMembers, gang_ref
from extenders.gang.state import GangRecord
from extenders.gang.status import gang_document
from extenders.sync.convert import pod_info
from tests.gang_support import member


def test_a_gang_whose_bookkeeping_was_forgotten_while_its_minimum_runs_is_permitted() -> None:
    bound = [pod_info(member(f"g-{i}", "g", 2)) for i in range(2)]
    ref = gang_ref(bound[0])
    doc = gang_document("default/g", None, GangMembers("default/g", bound=bound), ref, 0)
    assert (doc["state"], doc["bound"], doc["minMember"]) == ("permitted", 2, 2)
    short = gang_document("default/g", None, GangMembers("default/g", bound=bound[:1]), ref, 0)
    assert short["state"] == "waiting"


def test_a_waiting_gang_says_why_it_last_stood_down() -> None:
    pending = [pod_info(member("g-0", "g", 2))]
    record = GangRecord("default/g", {"min": "2", "released": "gang default/g stood down: only 1 of the 2"})
    doc = gang_document("default/g", record, GangMembers("default/g", pending=pending), gang_ref(pending[0]), 0)
    assert (doc["state"], doc["reason"]) == ("waiting", "gang default/g stood down: only 1 of the 2")
    record.fields["state"] = "permitted"
    doc = gang_document("default/g", record, GangMembers("default/g", pending=pending), gang_ref(pending[0]), 0)
    assert (doc["state"], doc["reason"]) == ("permitted", "")
