"""The gang part of filter (coscheduling's PreFilter): reject members early, with reasons.

A member fails on every node, as unresolvable (preempting cannot help), while its gang has
fewer live members than its minimum, while the gang cools down after a rejection, or while it
waits for admission to assemble; and while the members still needed for the quorum cannot
possibly fit in the free capacity of the nodes that pass this pod's predicates, as unresolvable
only when evicting every pod of lower priority would not make room either (else kube-scheduler
may preempt for it, and the preempt verb takes the gang's whole need into account).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import orjson

from extenders.engine import nominated_to_add
from extenders.gang.membership import GangMembers
from extenders.model import PodInfo
from extenders.plugins.node_unschedulable import UNSCHEDULABLE_TAINT
from extenders.resources import PODS
from extenders.snapshot import Snapshot
from extenders.tolerations import DO_NOT_SCHEDULE_EFFECTS, first_untolerated_taint, tolerations_tolerate


@dataclass(slots=True, frozen=True)
class GangVerdict:
    """The gang's answer for a member: ``fit`` False fails every candidate node with ``reason``."""

    gang: str
    fit: bool
    reason: str = ""
    unresolvable: bool = True
    event: str = ""  # the Event reason it is reported under (extenders.gang.reasons)

    def failed_nodes(self, names: Iterable[str]) -> dict[str, str]:
        """``{node: reason}`` for FailedAndUnresolvableNodes (empty when the gang lets the pod pass)."""
        return {} if self.fit else dict.fromkeys(names, self.reason)


def needed_requests(candidates: list[PodInfo], need: int) -> dict[str, int]:
    """A lower bound of what ``need`` of the candidates request together, per resource.

    Per resource, the ``need`` smallest requests are summed: whichever members complete the
    quorum, they request at least that much, so a shortfall against it is certain.
    """
    names = {r for p in candidates for r in p.requests if r != PODS}
    out: dict[str, int] = {}
    for name in names:
        values = sorted(p.requests.get(name, 0) for p in candidates)
        total = sum(values[:need])
        if total > 0:
            out[name] = total
    out[PODS] = need
    return out


# Pods a preemption could evict (``lower_than``): their room counts as free.
Evictable = Callable[[PodInfo], bool]


def lower_than(priority: int) -> Evictable:
    """Pods of lower priority than ``priority`` (and not already leaving): what preemption may evict."""
    return lambda pod: pod.priority < priority and not pod.terminating and not pod.terminal


def _free_on(
    snapshot: Snapshot, name: str, resources: Iterable[str], evictable: Evictable | None = None
) -> dict[str, int] | None:
    info = snapshot.node(name)
    if info is None or info.node is None:
        return None
    allocatable = info.allocatable
    gone = [p for p in info.pods.values() if evictable(p)] if evictable is not None else []
    out: dict[str, int] = {}
    for resource in resources:
        if resource == PODS:
            left = allocatable.get(PODS, 0) - len(info.pods) + len(gone)
        else:
            left = allocatable.get(resource, 0) - info.requested.get(resource, 0)
            left += sum(p.requests.get(resource, 0) for p in gone)
        out[resource] = max(left, 0)
    return out


def free_capacity(
    snapshot: Snapshot, nodes: Iterable[str], resources: Iterable[str], evictable: Evictable | None = None
) -> dict[str, int]:
    wanted = list(resources)
    free = dict.fromkeys(wanted, 0)
    for name in nodes:
        left = _free_on(snapshot, name, wanted, evictable)
        for resource, amount in (left or {}).items():
            free[resource] += amount
    return free


def smallest_member(candidates: list[PodInfo]) -> dict[str, int]:
    """Per resource, the least any candidate requests: every member needs at least this much."""
    names = {r for p in candidates for r in p.requests if r != PODS}
    smallest = {r: min(p.requests.get(r, 0) for p in candidates) for r in names}
    out = {r: v for r, v in smallest.items() if v > 0}
    out[PODS] = 1
    return out


def member_slots(
    snapshot: Snapshot, nodes: Iterable[str], smallest: dict[str, int], evictable: Evictable | None = None
) -> int:
    """How many members could sit on ``nodes`` at most: per node, how many of ``smallest`` fit."""
    total = 0
    for name in nodes:
        left = _free_on(snapshot, name, smallest, evictable)
        if left is not None:
            total += min(left[r] // amount for r, amount in smallest.items())
    return total


def keeps_nomination(snapshot: Snapshot, pod: PodInfo) -> bool:
    """Whether the node a preemption nominated ``pod`` to is still kept for it: the node exists, is
    neither cordoned nor tainted against the pod, and could take the pod, beside the pods nominated
    there of its priority or higher, once every pod of lower priority there is gone. Any other
    nomination places nothing; kube-scheduler moves or clears it on the pod's next attempt, and
    counting it meanwhile would let its siblings in short."""
    info = snapshot.node(pod.nominated_node_name) if pod.nominated_node_name else None
    facts = info.node if info is not None else None
    if info is None or facts is None:
        return False
    # A drain cordons the node and the node lifecycle taints it: the two node changes that come
    # between a preemption and the pod's next attempt.
    if facts.unschedulable and not tolerations_tolerate(pod.tolerations, UNSCHEDULABLE_TAINT):
        return False
    if first_untolerated_taint(facts.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None:
        return False
    wanted = [r for r in pod.requests if r != PODS]
    # Not lower_than: the victims of the preemption behind the nomination are terminating, and they go.
    free = _free_on(snapshot, info.name, [*wanted, PODS], lambda p: p.priority < pod.priority)
    if free is None:
        return False
    for ahead in nominated_to_add(pod, info, snapshot.nominated(), snapshot):
        free[PODS] -= 1
        for r in wanted:
            free[r] -= ahead.requests.get(r, 0)
    return free[PODS] >= 1 and all(free[r] >= pod.requests[r] for r in wanted)


def placement_key(pod: PodInfo) -> bytes:
    """What decides which nodes a member may go to, requests aside: members with equal keys pass
    the same nodes (a driver with its own node selector does not pass its workers' nodes)."""
    return orjson.dumps(
        [pod.node_selector, pod.affinity, pod.tolerations, pod.topology_spread, pod.host_ports],
        option=orjson.OPT_SORT_KEYS,
    )


def capacity_shortfall(
    gang: str,
    members: GangMembers,
    minimum: int,
    snapshot: Snapshot,
    passing: list[str],
    like: PodInfo | None = None,
    evictable: Evictable | None = None,
) -> str:
    """Why the members still needed for the quorum cannot fit ("" when they might); with
    ``evictable``, as if those pods were gone (would preempting them let the gang fit?).

    ``passing`` are the nodes that pass ``like``'s predicates, so only the unplaced members placed
    like it are counted against them: as many of those as the quorum needs even if every other
    unplaced member is placed. Two necessary conditions follow, so a gang that fits is never turned
    away: the sum of what those members request, and how many of them the nodes can hold one by one
    (members do not split across nodes: five members of 3 CPUs do not fit on four nodes of 4 CPUs).
    A member kube-scheduler nominated to a node (it preempted there) counts as placed while that
    node is kept for it (``keeps_nomination``): its own victims may not even show as gone yet.
    """
    me = like.uid if like is not None else None
    held = {p.uid for p in members.pending if p.uid != me and keeps_nomination(snapshot, p)}
    pending = [p for p in members.pending if p.uid not in held]
    alike = pending
    if like is not None:
        key = placement_key(like)
        alike = [p for p in pending if placement_key(p) == key]
    need = minimum - members.placed - len(held) - (len(pending) - len(alike))
    if need <= 0:
        return ""
    wanted = needed_requests(alike, need)
    free = free_capacity(snapshot, passing, wanted, evictable)
    short = [f"{r} {wanted[r]} (free {free[r]})" for r in sorted(wanted) if wanted[r] > free[r]]
    if short:
        return (
            f"gang {gang} cannot fit: the {need} more member(s) it needs request at least "
            f"{', '.join(short)} on the {len(passing)} node(s) that pass its predicates"
        )
    slots = member_slots(snapshot, passing, smallest_member(alike), evictable)
    if slots < need:
        return (
            f"gang {gang} cannot fit: it needs {need} more member(s), but the {len(passing)} node(s) "
            f"that pass its predicates have room for {slots}"
        )
    return ""
