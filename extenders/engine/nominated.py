"""Pods nominated to a node by a preemption, which the incoming pod must leave room for."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Set

from extenders.engine.prepared import PreparedPod
from extenders.engine.results import FilterResult
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import Verdict
from extenders.snapshot import NominatedPods, Snapshot

DEFAULT_SCHEDULER = "default-scheduler"


def _scheduler_of(pod: PodInfo) -> str:
    return pod.scheduler_name or DEFAULT_SCHEDULER


def nominated_to_add(pod: PodInfo, node: NodeInfo, nominated: NominatedPods, snapshot: Snapshot) -> list[PodInfo]:
    """The pods nominated to ``node`` that ``pod`` must leave room for (kube-scheduler's addGENominatedPods).

    Those of at least ``pod``'s priority, other than ``pod`` itself, and only of ``pod``'s scheduler:
    kube-scheduler knows the nominations of its own queue alone. One already placed (on this node
    it is counted there; on another one kube-scheduler dropped the nomination when it assumed it)
    is left out.
    """
    candidates = nominated.get(node.name)
    if not candidates:
        return []
    priority, uid, scheduler = pod.priority, pod.uid, _scheduler_of(pod)
    return [
        p
        for p in candidates
        if p.priority >= priority
        and p.uid != uid
        and _scheduler_of(p) == scheduler
        and p.uid not in node.pods
        and snapshot.find_pod(p.uid) is None
    ]


def with_pods(node: NodeInfo, pods: Iterable[PodInfo]) -> NodeInfo:
    """A copy of ``node`` holding ``pods`` as well (``node`` is shared with the snapshot: never changed)."""
    return NodeInfo.build(node.name, node.node, [*node.pods.values(), *pods], node.generation)


def without_pods(node: NodeInfo, uids: Set[str]) -> NodeInfo:
    """A copy of ``node`` without the pods ``uids`` (``node`` is shared with the snapshot: never changed)."""
    return NodeInfo.build(node.name, node.node, [p for p in node.pods.values() if p.uid not in uids], node.generation)


def without_own_reservation(snapshot: Snapshot, pod: PodInfo, node_names: Collection[str]) -> Snapshot:
    """``snapshot`` as kube-scheduler sees it when it schedules ``pod`` again: without the pod's own
    reservation on one of the candidates. A reservation outlives a bind whose replica died, or whose
    Binding got no answer; counted against the pod itself, it would keep the pod off the very node
    it holds (on a full cluster: off every node) until it expires. Bound pods stay counted."""
    uid = pod.uid
    name = snapshot.find_reservation(uid) if uid else None
    if name is None or name not in node_names:
        return snapshot
    info = snapshot.nodes[name]
    nodes = dict(snapshot.nodes)
    nodes[name] = without_pods(info, {uid})
    return dataclasses.replace(snapshot, nodes=nodes, sealed=False, summary_seed=snapshot.seed(), node_changes=None)


def with_nominated(
    prepared: PreparedPod, node: NodeInfo, nominated: NominatedPods
) -> tuple[PreparedPod, NodeInfo, list[PodInfo]] | None:
    """The pod's states and the node with the nominated pods it must yield to added, or None when none."""
    extra = nominated_to_add(prepared.pod, node, nominated, prepared.snapshot)
    if not extra:
        return None
    grown = with_pods(node, extra)
    return prepared.with_node(grown), grown, extra


def yield_to_nominated(prepared: PreparedPod, result: FilterResult, nominated: NominatedPods) -> None:
    """kube-scheduler's RunFilterPluginsWithNominatedPods over ``result`` (in place).

    A node holding nominated pods the pod must yield to passes only if it passes both with them
    and without them (the verdict already in ``result``); when it fails with them, that failure
    is the one reported. Only the nodes named in ``nominated`` are looked at.
    """
    nodes = prepared.snapshot.nodes
    passing: set[str] | None = None
    overrides: dict[str, Verdict] = {}
    for name in nominated:
        node = nodes.get(name)
        if node is None or node.node is None:
            continue
        if name not in result.failed and name not in result.unresolvable:
            if passing is None:
                passing = set(result.passing)
            if name not in passing:  # not asked about
                continue
        added = with_nominated(prepared, node, nominated)
        if added is None:
            continue
        with_them, grown, _extra = added
        verdict = with_them.verdict(grown)
        if verdict is not None:
            overrides[name] = verdict
    if not overrides:
        return
    result.passing = [name for name in result.passing if name not in overrides]
    for name, verdict in overrides.items():
        result.failed.pop(name, None)
        result.unresolvable.pop(name, None)
        result.fail(name, verdict)
