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
from operator import is_, is_not
from typing import Any, cast

from extenders.engine.results import FilterResult
from extenders.equivalence import ClassMemo
from extenders.model import Owner, PodInfo
from extenders.snapshot import Snapshot

_UNJUDGED: Any = object()  # never a stored answer


def class_wide(pod: PodInfo, snapshot: Snapshot) -> bool:
    """Whether the class's verdicts on ``snapshot`` are ``pod``'s own: the pod is not nominated (the
    engine leaves a pod's own nomination out of what it must yield to) and is placed nowhere (the
    engine leaves the pod itself out of a node's pods and of the counts that read other nodes, where
    its class-mates see it as any other pod)."""
    if pod.nominated_node_name:
        return False
    pending = snapshot.pending.get(pod.uid)
    if pending is not None and pending.nominated_node_name:
        return False
    return snapshot.find_pod(pod.uid) is None


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
    if _UNJUDGED in verdicts or not class_wide(pod, snapshot):
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


def keep(memo: ClassMemo, pod: PodInfo, snapshot: Snapshot, result: FilterResult) -> None:
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
    if not class_wide(pod, snapshot):
        return
    answers = memo.answers
    answers.update(zip(result.passing, repeat(None)))
    answers.update(result.failed)
    answers.update(result.unresolvable)
    memo.unresolvable.update(result.unresolvable)
