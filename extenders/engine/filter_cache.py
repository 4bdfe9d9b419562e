"""Filtering through the equivalence cache: node-local verdicts reused while the node parts they rest on are
unchanged, so a warm class only walks the nodes that changed."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, repeat
from operator import attrgetter, contains, eq, ge, is_, is_not, lt, not_, or_
from typing import cast

from extenders.engine.prepared import CrossStep, PreparedPod
from extenders.engine.results import NOT_FOUND, FilterResult
from extenders.equivalence import FILTER, ClassMemo, digests, fingerprints
from extenders.equivalence.packing import unpack_filter
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import Verdict
from extenders.snapshot import Snapshot

_PODS = attrgetter("pods")
_VERSION = attrgetter("version")
_FIT = attrgetter("fit")


def _holds_pod(snapshot: Snapshot, uid: str, names: list[str], infos: list[NodeInfo]) -> bool:
    """Whether one of the candidates (``infos``, named ``names``) holds the pod ``uid`` (placed or
    reserved there). A pod the snapshot has pending can only be placed as a reservation, which the
    summary indexes; for any other, every candidate is looked at."""
    if uid in snapshot.pending:
        reserved = snapshot.find_reservation(uid)
        return reserved is not None and reserved in names
    return any(map(contains, map(_PODS, infos), repeat(uid)))


def filter_cached(prepared: PreparedPod, node_names: Iterable[str], memo: ClassMemo) -> FilterResult:
    """``filter_prepared`` with node-local verdicts reused from ``memo`` (see ``_filter_walk``).

    When every candidate is known and none holds the pod, a candidate whose ``NodeInfo.version``
    is the one ``memo.held`` notes keeps its node-local verdict in ``memo.outcome``, read without the
    node's fingerprints and entry. With every step node-local that is the answer, in a few passes
    over the names in C, and only the other candidates are walked (and held for the next call); with
    steps that read other nodes, the walk takes the held verdicts and runs those steps on each node.
    """
    layout = prepared.layout()
    names = node_names if isinstance(node_names, list) else list(node_names)
    snapshot = prepared.snapshot
    found = list(map(snapshot.nodes.get, names))
    if any(map(is_, found, repeat(None))):
        return _filter_walk(prepared, names, memo, hold=False)
    infos = cast(list[NodeInfo], found)
    if _holds_pod(snapshot, prepared.pod.uid, names, infos):
        return _filter_walk(prepared, names, memo, hold=False)
    held = memo.held
    if memo.held_layout != layout.signature:
        held.clear()
        memo.outcome.clear()
        memo.held_at.clear()
        memo.held_layout = layout.signature
    same = list(map(eq, map(held.get, names, repeat(0)), map(_VERSION, infos)))  # versions start at 1
    computed = from_shared = 0
    if False in same:
        walked = _filter_walk(prepared, list(compress(names, map(not_, same))), memo, hold=True)
        computed, from_shared = walked.computed, walked.shared
    verdicts = list(map(memo.outcome.__getitem__, names))
    if layout.cross:  # the steps that read other nodes still run, on each node they decide
        _cross_all(prepared.pod, infos, layout.cross, list(map(memo.held_at.__getitem__, names)), verdicts)
    result = FilterResult(list(compress(names, map(is_, verdicts, repeat(None)))))
    if len(result.passing) != len(names):
        fail = result.fail
        for name, verdict in compress(zip(names, verdicts, strict=True), map(is_not, verdicts, repeat(None))):
            if verdict is not None:  # always (compressed so); the type checker cannot tell
                fail(name, verdict)
    result.reused, result.computed, result.shared = len(names) - computed, computed, from_shared
    return result


def _cross_all(
    pod: PodInfo, infos: list[NodeInfo], cross: list[CrossStep], failed_at: list[int], verdicts: list[Verdict | None]
) -> None:
    """``verdicts`` (node-local, one per node of ``infos``) once the steps that read other nodes have
    run, in place: each step, in policy order, on the nodes whose first failing local step
    (``failed_at``, -1: none) does not come before it and that no earlier step refused, all at once
    where the filter can (``check_all``), else node by node.

    Kept in C passes where it can: this runs over every candidate of every call for such pods, and
    most often every node passed the local steps (kube-scheduler's own filters sent only those).
    """
    count = len(infos)
    # The nodes still undecided, by position (None: every node, all of them passed the local steps).
    undecided: list[int] | None = None
    if any(map(is_not, verdicts, repeat(None))):
        undecided = list(compress(range(count), map(is_not, verdicts, repeat(NOT_FOUND))))
    for before, check, state, check_all in cross:
        deciding: list[int] | None = None
        nodes = infos
        if undecided is not None:
            # A step runs on a node whose local steps all passed, or failed first at or after it.
            reaches = list(map(or_, map(lt, failed_at, repeat(0)), map(ge, failed_at, repeat(before))))
            deciding = list(compress(undecided, map(reaches.__getitem__, undecided)))
            if not deciding:
                break  # later steps come later still: no node reaches them
            nodes = list(map(infos.__getitem__, deciding))
        outcomes = check_all(pod, nodes, state) if check_all is not None else [check(pod, n, state) for n in nodes]
        refused = list(compress(range(len(outcomes)), map(not_, map(_FIT, outcomes))))
        if not refused:
            continue
        where = refused if deciding is None else list(map(deciding.__getitem__, refused))
        for i, j in zip(where, refused, strict=True):
            verdicts[i] = outcomes[j]
        gone = set(where)
        undecided = [i for i in (range(count) if undecided is None else undecided) if i not in gone]


def _filter_walk(prepared: PreparedPod, names: list[str], memo: ClassMemo, hold: bool) -> FilterResult:
    """``filter_prepared`` with node-local verdicts reused from ``memo`` where the parts of the node
    they rest on are unchanged, and stored there where not.

    A memo entry is ``(fingerprints, known, failed_at, verdict)``: the node's fingerprints when it
    was evaluated, how many of them the verdict rests on, the position of the first failing local
    step (-1: none) and its verdict. The steps that read other nodes run on every call, in policy
    order: those before the failing local step, or all of them when the node passed. A node the
    memo has no valid entry for may have one from another replica (``memo.shared``), taken when the
    digests it carries are the node's; what is computed goes to ``memo.outbox`` when there is one.
    ``hold``: no node holds the pod; each node's node-local verdict is noted in ``memo.held``,
    ``memo.outcome`` and ``memo.held_at`` for ``filter_cached``, which runs the steps that read
    other nodes itself (``_cross_all``): the result then carries node-local verdicts only.
    """
    nodes = prepared.snapshot.nodes
    pod = prepared.pod
    uid = pod.uid
    layout = prepared.layout()
    families, key, local, tag = layout.families, layout.key, layout.local, layout.tag
    cross = [] if hold else layout.cross
    verdicts: list[Verdict | None] = []
    # The nodes walked through the local steps, which the cross-node steps still decide (``_cross_all``).
    crossing: list[int] = []
    crossing_nodes: list[NodeInfo] = []
    crossing_at: list[int] = []
    entries = memo.filter
    shared = memo.shared.get(FILTER)
    outbox = memo.outbox
    held, held_verdicts, held_at = memo.held, memo.outcome, memo.held_at
    # Counted where rare (most nodes are reused): reused = every node - computed.
    computed = from_shared = 0
    for name, node in zip(names, map(nodes.get, names), strict=True):
        verdict: Verdict | None
        if node is None or node.node is None:
            verdict = NOT_FOUND
            computed += 1
            if hold and node is not None:
                held[name], held_verdicts[name], held_at[name] = node.version, verdict, -1
        elif uid in node.pods:  # some filters leave the pod itself out: not a class-wide answer
            verdict = prepared.first_failure(node)
            computed += 1
        else:
            current = node.derived.get(key)
            if current is None:
                current = fingerprints(node, families, key)
            entry = entries.get(name)
            if entry is not None and (
                entry[0] is current or current[: entry[1]] == entry[0][: entry[1]]  # the node changed elsewhere
            ):
                _, _, failed_at, verdict = entry
            elif (
                shared
                and (blob := shared.pop(name, None)) is not None
                and (taken := unpack_filter(blob, tag, digests(node, families)))
            ):
                from_shared += 1
                known, failed_at, verdict = taken
                entries[name] = (current, known, failed_at, verdict)
            else:
                computed += 1
                failed_at, verdict, known = -1, None, len(families)
                for position, (check, state, reads) in enumerate(local):
                    outcome = check(pod, node, state)
                    if not outcome.fit:
                        failed_at, verdict, known = position, outcome, reads
                        break
                entries[name] = (current, known, failed_at, verdict)
                if outbox is not None:
                    outbox.append((FILTER, name, node, families, (tag, known, failed_at, verdict)))
            if hold:
                held[name], held_verdicts[name], held_at[name] = node.version, verdict, failed_at
            if cross:
                crossing.append(len(verdicts))
                crossing_nodes.append(node)
                crossing_at.append(failed_at)
        verdicts.append(verdict)
    if crossing:
        decided = list(map(verdicts.__getitem__, crossing))
        _cross_all(pod, crossing_nodes, cross, crossing_at, decided)
        for i, verdict in zip(crossing, decided, strict=True):
            verdicts[i] = verdict
    result = FilterResult()
    passing, failed, unresolvable = result.passing, result.failed, result.unresolvable
    for name, verdict in zip(names, verdicts, strict=True):
        if verdict is None:
            passing.append(name)
        elif verdict.unresolvable:
            unresolvable[name] = verdict.reason
        else:
            failed[name] = verdict.reason
    result.reused, result.computed, result.shared = len(names) - computed, computed, from_shared
    return result
