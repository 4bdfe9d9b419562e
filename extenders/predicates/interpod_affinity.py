"""MatchInterPodAffinity: kube-scheduler's InterPodAffinity filter (required terms only).

``prepare`` (PreFilter) walks the snapshot once and counts, per (topologyKey, value):
- existing pods whose required anti-affinity terms select the incoming pod (symmetry);
- existing pods that match *all* of the incoming pod's affinity terms (one count per term);
- existing pods matching each of the incoming pod's anti-affinity terms.
``check`` is then a handful of dict lookups per term. Order and codes follow the plugin:
affinity unmet is unresolvable; the pod's own anti-affinity and existing pods' anti-affinity
are resolvable (evicting the matching pods fixes them). The first pod of a self-affine group
passes when no pod anywhere matches its affinity terms and it matches them itself. A
non-empty namespaceSelector is evaluated only on ``kubernetes.io/metadata.name`` (see
extenders.labels); other namespace labels are not known, so such selectors add no namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extenders.labels import AffinityTerm, compile_affinity_terms, required_pod_affinity_terms
from extenders.model import NodeInfo, PodInfo
from extenders.predicates.base import FIT, SKIP, Verdict, register
from extenders.snapshot import Snapshot

NAME = "MatchInterPodAffinity"
AFFINITY_NOT_MATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
_FAIL_AFFINITY = Verdict(False, AFFINITY_NOT_MATCH, unresolvable=True)
_FAIL_ANTI = Verdict(False, ANTI_AFFINITY_NOT_MATCH)
_FAIL_EXISTING = Verdict(False, EXISTING_ANTI_AFFINITY_NOT_MATCH)

Pair = tuple[str, str]


def pod_affinity_terms(pod: PodInfo) -> tuple[AffinityTerm, ...]:
    return compile_affinity_terms(required_pod_affinity_terms(pod.affinity, "podAffinity"), pod.namespace)


def pod_anti_affinity_terms(pod: PodInfo) -> tuple[AffinityTerm, ...]:
    return compile_affinity_terms(required_pod_affinity_terms(pod.affinity, "podAntiAffinity"), pod.namespace)


@dataclass(slots=True)
class AffinityState:
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    affinity_counts: dict[Pair, int]
    anti_affinity_counts: dict[Pair, int]
    existing_anti_counts: dict[Pair, int]
    existing_keys: tuple[str, ...]
    matches_own_affinity: bool


def _bump(counts: dict[Pair, int], pair: Pair, delta: int) -> None:
    value = counts.get(pair, 0) + delta
    if value:
        counts[pair] = value
    else:
        counts.pop(pair, None)


def _add_node(state: AffinityState, pod: PodInfo, node: NodeInfo, sign: int) -> None:
    """Add (sign=1) or remove (sign=-1) one node's contribution to the counts."""
    if node.node is None:
        return
    labels = node.labels
    namespace, pod_labels, uid = pod.namespace, pod.labels, pod.uid
    for existing in node.pods_with_required_anti_affinity:
        if existing.uid == uid:
            continue
        for term in pod_anti_affinity_terms(existing):
            value = labels.get(term.topology_key)
            if value is not None and term.matches(namespace, pod_labels):
                _bump(state.existing_anti_counts, (term.topology_key, value), sign)
    affinity, anti = state.affinity, state.anti_affinity
    if not affinity and not anti:
        return
    for other in node.pods.values():
        if other.uid == uid:
            continue
        other_ns, other_labels = other.namespace, other.labels
        if affinity and all(t.matches(other_ns, other_labels) for t in affinity):
            for term in affinity:
                value = labels.get(term.topology_key)
                if value is not None:
                    _bump(state.affinity_counts, (term.topology_key, value), sign)
        for term in anti:
            if term.matches(other_ns, other_labels):
                value = labels.get(term.topology_key)
                if value is not None:
                    _bump(state.anti_affinity_counts, (term.topology_key, value), sign)


def _finish(state: AffinityState) -> AffinityState:
    state.existing_keys = tuple(sorted({key for key, _ in state.existing_anti_counts}))
    return state


class MatchInterPodAffinity:
    name = NAME

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        affinity = pod_affinity_terms(pod)
        state = AffinityState(
            affinity=affinity,
            anti_affinity=pod_anti_affinity_terms(pod),
            affinity_counts={},
            anti_affinity_counts={},
            existing_anti_counts={},
            existing_keys=(),
            matches_own_affinity=all(t.matches(pod.namespace, pod.labels) for t in affinity),
        )
        scan_all = bool(state.affinity or state.anti_affinity)
        for node in snapshot.nodes.values():
            if scan_all or node.pods_with_required_anti_affinity:
                _add_node(state, pod, node, 1)
        if not scan_all and not state.existing_anti_counts:
            return SKIP
        return _finish(state)

    def adjust(self, state: Any, pod: PodInfo, old: NodeInfo | None, new: NodeInfo) -> Any:
        if state is SKIP:
            # Removing pods cannot create anti-affinity; adding them could.
            state = AffinityState((), (), {}, {}, {}, (), True)
            _add_node(state, pod, new, 1)
            return _finish(state) if state.existing_anti_counts else SKIP
        assert isinstance(state, AffinityState)
        fresh = AffinityState(
            state.affinity,
            state.anti_affinity,
            dict(state.affinity_counts),
            dict(state.anti_affinity_counts),
            dict(state.existing_anti_counts),
            (),
            state.matches_own_affinity,
        )
        if old is not None:
            _add_node(fresh, pod, old, -1)
        _add_node(fresh, pod, new, 1)
        return _finish(fresh)

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        labels = node.labels
        if state.affinity:
            counts = state.affinity_counts
            pods_exist = True
            for term in state.affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    return _FAIL_AFFINITY
                if counts.get((term.topology_key, value), 0) <= 0:
                    pods_exist = False
            if not pods_exist and not (not counts and state.matches_own_affinity):
                return _FAIL_AFFINITY
        anti_counts = state.anti_affinity_counts
        if anti_counts:
            for term in state.anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and anti_counts.get((term.topology_key, value), 0) > 0:
                    return _FAIL_ANTI
        existing = state.existing_anti_counts
        if existing:
            for key in state.existing_keys:
                value = labels.get(key)
                if value is not None and existing.get((key, value), 0) > 0:
                    return _FAIL_EXISTING
        return FIT


register(MatchInterPodAffinity())
