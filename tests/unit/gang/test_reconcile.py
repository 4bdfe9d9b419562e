"""What the reconciler plans from the bookkeeping and a snapshot (extenders/gang/reconcile.py)."""

from __future__ import annotations

from collections.abc import Sequence

from extenders.gang.membership import GangIndex
from extenders.gang.reconcile import Action, plan
from extenders.gang.state import GangBrief
from extenders.model import NodeInfo, PodGroupInfo, PodInfo
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info
from tests.gang_support import gpu_node, member


def index(pending: Sequence[PodInfo], placed: Sequence[PodInfo] = (), groups: Sequence[PodGroupInfo] = ()) -> GangIndex:
    """A held (assumed) pod is pending in the API too: unless ``pending`` says otherwise, as it was."""
    node = NodeInfo.build("n1", node_facts(gpu_node("n1")), list(placed))
    unbound = {p.uid: p for p in placed if p.assumed} | {p.uid: p for p in pending}
    return GangIndex(Snapshot(nodes={"n1": node}, pending=unbound, objects={"podgroups": {g.key: g for g in groups}}))


def brief(
    gang: str,
    minimum: int | None = 3,
    state: str = "",
    *,
    admitted: bool = False,
    queued: bool = False,
    arrivals: tuple[str, ...] = (),
) -> GangBrief:
    return GangBrief(f"default/{gang}", minimum, state, admitted, queued, arrivals)


def held(name: str, gang: str, minimum: int | None = 3) -> PodInfo:
    pod = pod_info(member(name, gang, minimum))
    pod.assumed = True
    return pod


def test_a_gang_with_no_live_member_vanishes_whatever_its_state() -> None:
    leaving = pod_info(member("a-0", "a", 3))
    leaving.deletion_timestamp = "2024-01-01T00:00:00Z"
    snap = index([leaving])
    for state in ("", "permitted", "rejected"):
        assert plan([brief("a", state=state)], snap) == [Action("default/a", 0, 3)]


def test_a_gang_that_agrees_with_its_pods_needs_nothing() -> None:
    pods = [pod_info(member(f"a-{i}", "a", 3)) for i in range(3)]
    assert plan([brief("a", admitted=True)], index(pods)) == []
    assert plan([brief("a", state="permitted")], index(pods[:1])) == [], "permitted: decided"
    # Too few members, but holding nothing: filter turns them away without the reconciler.
    assert plan([brief("a")], index(pods[:2])) == []


def test_a_short_gang_that_holds_something_stands_down_with_the_reason() -> None:
    a0, a1 = held("a-0", "a"), held("a-1", "a")
    (action,) = plan([brief("a", admitted=True, arrivals=(a0.uid, a1.uid))], index([], [a0, a1]))
    assert (action.live, action.minimum, set(action.placed), action.stray) == (2, 3, {a0.uid, a1.uid}, ())
    assert action.why == "gang default/a stood down: only 2 of the 3 required members exist"
    assert plan([brief("a", queued=True)], index([], [a0, a1]))[0].why == action.why


def test_a_minimum_that_cannot_be_told_any_more_stands_down_with_the_label_error() -> None:
    pods = [pod_info(member(f"t-{i}", "t")) for i in range(3)]  # a PodGroup label, no annotation
    (action,) = plan([brief("t", admitted=True)], index(pods))
    assert action.minimum is None and "no PodGroup default/t with spec.minMember" in action.why
    group = PodGroupInfo("default", "t", 2, "2024-01-01T00:00:00Z")
    (action,) = plan([brief("t", minimum=None)], index(pods, groups=[group]))
    assert (action.minimum, action.why) == (2, ""), "a minimum that appears is written (and nudges)"


def test_a_changed_minimum_and_an_arrival_whose_pod_left_are_planned() -> None:
    a0 = held("a-0", "a", 2)
    pods = [pod_info(member(f"a-{i}", "a", 2)) for i in (1, 2)]
    (action,) = plan([brief("a", minimum=3, arrivals=(a0.uid,))], index(pods, [a0]))
    assert (action.live, action.minimum, action.placed, action.why) == (3, 2, (a0.uid,), "")
    moved = pod_info(member("a-0", "b", 2, uid=a0.uid))
    (action,) = plan([brief("a", minimum=2, arrivals=(a0.uid,))], index([*pods, moved], [a0]))
    assert action.stray == (a0.uid,) and action.live == 2
    assert plan([brief("a", minimum=2, arrivals=(pods[0].uid,))], index(pods, [a0])) == []


def test_wire_form_names_an_unknown_minimum_minus_one() -> None:
    wire = Action("ns/g", 0, None, ("u1",), ("u2",), "why").wire()
    assert wire == {"g": "ns/g", "live": 0, "min": -1, "placed": ["u1"], "stray": ["u2"], "why": "why"}
