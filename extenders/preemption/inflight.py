"""Victims kube-scheduler is evicting that the snapshot may not show yet (it evicts asynchronously
since 1.33, and its informer may see a deletion before the snapshot does): views of the snapshot
where they are leaving, or gone."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set

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
