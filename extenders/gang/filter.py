"""The gang part of filter (coscheduling's PreFilter): reject members early, with reasons.

A member fails on every node, as unresolvable (preempting cannot help), while its gang has
fewer live members than its minimum, while the members still needed for the quorum cannot
possibly fit in the free capacity of the nodes that pass this pod's predicates, while the gang
cools down after a rejection, or while it waits for admission to assemble.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from extenders.gang.membership import GangMembers
from extenders.model import PodInfo
from extenders.resources import PODS
from extenders.snapshot import Snapshot


@dataclass(slots=True, frozen=True)
class GangVerdict:
    """The gang's answer for a member: ``fit`` False fails every candidate node with ``reason``."""

    gang: str
    fit: bool
    reason: str = ""
    unresolvable: bool = True

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


def free_capacity(snapshot: Snapshot, nodes: Iterable[str], resources: Iterable[str]) -> dict[str, int]:
    free = dict.fromkeys(resources, 0)
    for name in nodes:
        info = snapshot.node(name)
        if info is None or info.node is None:
            continue
        allocatable = info.allocatable
        for resource in free:
            if resource == PODS:
                left = allocatable.get(PODS, 0) - len(info.pods)
            else:
                left = allocatable.get(resource, 0) - info.requested.get(resource, 0)
            if left > 0:
                free[resource] += left
    return free


def capacity_shortfall(gang: str, members: GangMembers, minimum: int, snapshot: Snapshot, passing: list[str]) -> str:
    """Why the members still needed for the quorum cannot fit ("" when they might)."""
    need = minimum - members.placed
    if need <= 0:
        return ""
    wanted = needed_requests(members.pending, need)
    free = free_capacity(snapshot, passing, wanted)
    short = [f"{r} {wanted[r]} (free {free[r]})" for r in sorted(wanted) if wanted[r] > free[r]]
    if not short:
        return ""
    return (
        f"gang {gang} cannot fit: the {need} more member(s) it needs request at least "
        f"{', '.join(short)} on the {len(passing)} node(s) that pass its predicates"
    )
