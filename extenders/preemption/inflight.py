"""Victims kube-scheduler is evicting that the snapshot may not show yet (it evicts asynchronously
since 1.33, and its informer may see a deletion before the snapshot does): views of the snapshot
where they are leaving, or gone."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from extenders import engine
from extenders.model import NodeInfo, PodInfo
from extenders.policy import Policy
from extenders.snapshot import Snapshot

# What a marked pod's deletion timestamp reads as: it only needs to be set (see extenders.pdb.is_leaving).
MARKED = "preempting"


def with_leaving(snapshot: Snapshot, uids: Set[str]) -> Snapshot:
    """``snapshot`` with the placed pods of ``uids`` marked as terminating; the snapshot itself when
    none of them is placed and live."""
    if not uids:
        return snapshot
    nodes: dict[str, NodeInfo] | None = None
    for name, info in snapshot.nodes.items():
        hit = [uid for uid in uids & info.pods.keys() if info.pods[uid].deletion_timestamp is None]
        if not hit:
            continue
        marked = [dataclasses.replace(p, deletion_timestamp=MARKED) if p.uid in hit else p for p in info.pods.values()]
        nodes = nodes if nodes is not None else dict(snapshot.nodes)
        nodes[name] = NodeInfo.build(name, info.node, marked, info.generation)
    return snapshot if nodes is None else _with_nodes(snapshot, nodes)


def without_pods(snapshot: Snapshot, by_node: Mapping[str, Set[str]]) -> Snapshot:
    """``snapshot`` without the pods ``by_node`` names on each node, as if their deletion were seen."""
    nodes = dict(snapshot.nodes)
    for name, uids in by_node.items():
        info = nodes.get(name)
        if info is not None and uids & info.pods.keys():
            nodes[name] = engine.without_pods(info, uids)
    return _with_nodes(snapshot, nodes)


def fit_without_own_victims(
    policy: Policy, pod: PodInfo, snapshot: Snapshot, refused: Set[str], answered: Mapping[str, Set[str]]
) -> tuple[list[str], Snapshot]:
    """The ``refused`` nodes ``pod`` fits once the victims its own preempt answers offered there
    (``answered``, node -> uids) are gone, and the view it fits them in. Only its nominated node
    counts when it has one: kube-scheduler evicts on that node alone."""
    nominated = pod.nominated_node_name
    leaving: dict[str, Set[str]] = {}
    for name, uids in answered.items():
        info = snapshot.nodes.get(name)
        if info is not None and name in refused and nominated in ("", name) and uids & info.pods.keys():
            leaving[name] = uids
    if not leaving:
        return [], snapshot
    view = without_pods(snapshot, leaving)
    names = list(leaving)
    return engine.filter_nodes(policy, pod, engine.without_own_reservation(view, pod, names), names).passing, view


def _with_nodes(snapshot: Snapshot, nodes: dict[str, NodeInfo]) -> Snapshot:
    return dataclasses.replace(snapshot, nodes=nodes, sealed=False, summary_seed=snapshot.seed(), node_changes=None)


@dataclass(frozen=True, slots=True)
class Repeat:
    """kube-scheduler proposing again, on one node, only victims an earlier answer gave the same
    preemptor there: the node, and those of the victims the snapshot still holds."""

    node: str
    live: frozenset[str]


def repeated_preemption(
    preemptor: PodInfo, candidates: Mapping[str, Sequence[str]], answered: Mapping[str, Set[str]], snapshot: Snapshot
) -> Repeat | None:
    """The node where kube-scheduler repeats a preemption of ``preemptor`` it has already made, if any.

    It retries a preemptor as soon as any pod goes, and its cache may still hold the victims it
    evicted: it then proposes them again. A node whose proposed victims all come from this
    preemptor's earlier answers there and are all gone from the snapshot is one; so is, while its
    victims are still there, the node the preemptor is nominated to (or, before the nomination
    shows, the only node matching).
    """
    matching = [name for name, uids in candidates.items() if uids and set(uids) <= answered.get(name, frozenset())]
    if not matching:
        return None
    for name in matching:
        if all(snapshot.find_pod(uid) is None for uid in candidates[name]):
            return Repeat(name, frozenset())
    nominated = preemptor.nominated_node_name
    node = nominated if nominated in matching else (matching[0] if not nominated and len(matching) == 1 else "")
    if not node:
        return None
    return Repeat(node, frozenset(uid for uid in candidates[node] if snapshot.find_pod(uid) is not None))
