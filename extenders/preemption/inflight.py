"""Victims kube-scheduler is evicting that the snapshot may not show yet (it evicts asynchronously
since 1.33): a view of the snapshot where they are leaving, for the next preemption decisions."""

from __future__ import annotations

import dataclasses
from collections.abc import Set

from extenders.model import NodeInfo
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
    if nodes is None:
        return snapshot
    return dataclasses.replace(snapshot, nodes=nodes, sealed=False, summary_seed=snapshot.seed(), node_changes=None)
