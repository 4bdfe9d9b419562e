"""The filter verb: which of the candidates a pod fits on, and why the others fail."""

from __future__ import annotations

from collections.abc import Iterable

from extenders.engine import answers
from extenders.engine.filter_cache import filter_cached
from extenders.engine.nominated import yield_to_nominated
from extenders.engine.prepared import PreparedPod
from extenders.engine.results import FilterResult
from extenders.equivalence import ClassMemo
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import Verdict
from extenders.policy import Policy
from extenders.snapshot import Snapshot


def filter_nodes(
    policy: Policy, pod: PodInfo, snapshot: Snapshot, node_names: Iterable[str], memo: ClassMemo | None = None
) -> FilterResult:
    """Split ``node_names`` into passing, failed (preemption may help) and unresolvable.

    With ``memo`` (the pod's equivalence class), node-local verdicts are reused where the node's
    relevant parts are unchanged; ``reused`` and ``computed`` on the result count the nodes.
    Pods nominated to a node are then accounted for as kube-scheduler does (``Snapshot.nominated``),
    on those nodes only. A class already filtered on this very snapshot answers from the verdicts it
    was given there (``answers``), with no pass of the engine.
    """
    names = node_names if isinstance(node_names, list) else list(node_names)
    if memo is not None:
        recalled = answers.recall(memo, pod, snapshot, names)
        if recalled is not None:
            return recalled
    prepared = PreparedPod.build(policy, pod, snapshot)
    if memo is not None and memo.admitted and not policy.always_check_all_predicates and prepared.cacheable():
        result = filter_cached(prepared, names, memo)
    else:
        result = filter_prepared(prepared, names)
        if memo is not None:
            result.computed = len(result.passing) + len(result.failed) + len(result.unresolvable)
    nominated = snapshot.nominated()
    if nominated:
        yield_to_nominated(prepared, result, nominated)
    if memo is not None:
        answers.keep(memo, pod, snapshot, result)
    return result


def filter_prepared(prepared: PreparedPod, node_names: Iterable[str]) -> FilterResult:
    result = FilterResult()
    passing, failed, unresolvable = result.passing, result.failed, result.unresolvable
    nodes = prepared.snapshot.nodes
    for name in node_names:
        verdict = prepared.verdict(nodes.get(name))
        if verdict is None:
            passing.append(name)
        elif verdict.unresolvable:
            unresolvable[name] = verdict.reason
        else:
            failed[name] = verdict.reason
    return result


def fits(
    policy: Policy, pod: PodInfo, node: NodeInfo, snapshot: Snapshot, prepared: PreparedPod | None = None
) -> list[Verdict]:
    """Failing verdicts of every predicate for ``pod`` on ``node`` (empty list: it fits).

    ``node`` may be a modified copy of the snapshot's node (victims removed): the prepared
    states are adjusted to it. Pass ``prepared`` (from ``prepare_pod``) to reuse the
    snapshot-wide work across many such checks.
    """
    base = prepared if prepared is not None else PreparedPod.build(policy, pod, snapshot)
    return base.with_node(node).failures(node)
