"""Pending pods by the node a preemption nominated them to, kept up to date a change at a time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from extenders.model import PodInfo

# Unbound pods by the node a preemption nominated them to (``status.nominatedNodeName``).
NominatedPods = Mapping[str, tuple[PodInfo, ...]]


def _nomination(pod: PodInfo | None) -> str:
    return pod.nominated_node_name if pod is not None and not pod.node_name else ""


def index_nominated(pending: Iterable[PodInfo]) -> dict[str, tuple[PodInfo, ...]]:
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pending:
        node = _nomination(pod)
        if node:
            by_node.setdefault(node, []).append(pod)
    return {name: tuple(pods) for name, pods in by_node.items()}


def patch_nominated(
    index: NominatedPods, before: Mapping[str, PodInfo], after: Mapping[str, PodInfo], changed: Iterable[str]
) -> NominatedPods:
    """``index`` (of ``before``) brought up to ``after`` by looking only at the ``changed`` pending uids."""
    out: dict[str, list[PodInfo]] | None = None
    for uid in changed:
        old, new = _nomination(before.get(uid)), _nomination(after.get(uid))
        if not old and not new:
            continue
        if out is None:
            out = {name: list(pods) for name, pods in index.items()}
        if old:
            out[old] = [p for p in out.get(old, ()) if p.uid != uid]
        if new:
            out.setdefault(new, []).append(after[uid])
    if out is None:
        return index
    return {name: tuple(pods) for name, pods in out.items() if pods}
