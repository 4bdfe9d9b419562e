"""A class's filter verdicts on one snapshot, recalled whole for the next pod of the class on that snapshot.

Between two reads of the shared snapshot, every pod of a class gets the same verdict on a node, so
the pods of a Deployment filtered one after another on a replica's held read (the usual case when
it scales up) need no engine pass after the first two. Verdicts are held per node name, so calls that
name other candidates (kube-scheduler samples a share of the nodes) still reuse them; a call
naming a node not yet judged on that snapshot goes through the engine, which adds its verdicts.
"""

from __future__ import annotations

import weakref
from itertools import compress, filterfalse, repeat
from operator import attrgetter, contains, is_, is_not
from typing import Any, cast

from extenders.engine.results import FilterResult
from extenders.equivalence import ClassMemo
from extenders.model import Owner, PodInfo
from extenders.snapshot import Snapshot

_PODS = attrgetter("pods")
_UNJUDGED: Any = object()  # never a stored answer


def class_wide(pod: PodInfo, snapshot: Snapshot, names: list[str]) -> bool:
    """Whether the class's verdicts on ``snapshot`` are ``pod``'s own: the pod is not nominated (the
    engine leaves a pod's own nomination out of what it must yield to) and holds no place on the
    candidates (some filters leave the pod itself out, and a reservation of its own is taken off)."""
    if pod.nominated_node_name:
        return False
    uid = pod.uid
    pending = snapshot.pending.get(uid)
    if pending is not None:  # a pending pod can only be placed as a reservation
        return not pending.nominated_node_name and snapshot.find_reservation(uid) is None
    return not any(map(contains, map(_PODS, filter(None, map(snapshot.nodes.get, names))), repeat(uid)))


def _identity(pod: PodInfo) -> tuple[str, Owner | None]:
    """What of a pod outside its class the verdicts may still rest on: the scheduler whose nominated
    pods it yields to, and the owner that configured default spreading constraints select by."""
    return pod.scheduler_name, pod.owner


def _held_for(memo: ClassMemo, pod: PodInfo, snapshot: Snapshot) -> bool:
    held = memo.answered
    return held is not None and held() is snapshot and memo.answered_for == _identity(pod)


def recall(memo: ClassMemo, pod: PodInfo, snapshot: Snapshot, names: list[str]) -> FilterResult | None:
    """The verdicts of every candidate as held for ``pod``'s class on this very snapshot, or None when
    the class was not filtered on it, a candidate was not judged, or they may not be ``pod``'s."""
    if not _held_for(memo, pod, snapshot):
        return None
    answers = memo.answers
    verdicts = list(map(answers.get, names, repeat(_UNJUDGED)))
    if _UNJUDGED in verdicts or not class_wide(pod, snapshot, names):
        return None
    result = FilterResult(list(compress(names, map(is_, verdicts, repeat(None)))))
    if len(result.passing) != len(names):
        # Passes in C over the names: a warm call's whole cost is these and the look-ups above.
        failing = list(compress(names, map(is_not, verdicts, repeat(None))))
        cannot = memo.unresolvable
        reasons = cast(dict[str, str], answers)  # a failing name's answer is its reason
        failed = failing
        if cannot and not cannot.isdisjoint(failing):
            stuck = list(filter(cannot.__contains__, failing))
            result.unresolvable = dict(zip(stuck, map(reasons.__getitem__, stuck), strict=True))
            failed = list(filterfalse(cannot.__contains__, failing))
        result.failed = dict(zip(failed, map(reasons.__getitem__, failed), strict=True))
    result.reused = len(names)
    result.recalled = True
    return result


def keep(memo: ClassMemo, pod: PodInfo, snapshot: Snapshot, names: list[str], result: FilterResult) -> None:
    """Hold ``result`` (the engine's verdicts for ``pod`` on ``snapshot``) for the next pod of the class,
    when the verdicts are the class's and this is the class's second call on this snapshot at least.
    The first call only notes the snapshot: where classes take turns (the next pod of a class comes
    after the snapshot changed), holding verdicts would cost every call and serve none. Only sealed
    snapshots (the replica's reads) count: a view made for one call is never seen again."""
    if not memo.admitted or not snapshot.sealed:
        return
    if not _held_for(memo, pod, snapshot):
        memo.answered = weakref.ref(snapshot)  # held weakly: snapshots are never kept alive by a class
        memo.answered_for = _identity(pod)
        memo.answers = {}
        memo.unresolvable = set()
        return
    if not class_wide(pod, snapshot, names):
        return
    answers = memo.answers
    answers.update(zip(result.passing, repeat(None)))
    answers.update(result.failed)
    answers.update(result.unresolvable)
    memo.unresolvable.update(result.unresolvable)
