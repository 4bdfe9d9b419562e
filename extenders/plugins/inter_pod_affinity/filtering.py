"""MatchInterPodAffinity: kube-scheduler's InterPodAffinity filter (required terms only).

``prepare`` (PreFilter) walks the snapshot once and counts, per (topologyKey, value):
- existing pods whose required anti-affinity terms select the incoming pod (symmetry);
- existing pods that match *all* of the incoming pod's affinity terms (one count per term);
- existing pods matching each of the incoming pod's anti-affinity terms.
``check`` is then a handful of dict lookups per term. Order and codes follow the plugin:
affinity unmet is unresolvable; the pod's own anti-affinity and existing pods' anti-affinity
are resolvable (evicting the matching pods fixes them). The first pod of a self-affine group
passes when no pod anywhere matches its affinity terms and it matches them itself.
namespaceSelectors are matched against the snapshot's Namespaces (see ``terms``): the incoming
pod's are replaced by the namespaces they select, existing pods' are matched against the labels
of the incoming pod's namespace. The pods the incoming pod's terms select are read through the
nodes' label index (``pod_query``), and only nodes that can hold one, or hold pods with
anti-affinity, are visited (``cluster_summary``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from extenders.labels import AffinityTerm, compile_affinity_terms, required_pod_affinity_terms
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, Verdict
from extenders.plugins.helper.node_labels import labels_of, positions_in, values_of
from extenders.plugins.inter_pod_affinity.terms import by_namespace, may_select, namespace_labels, resolve_terms
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery, term_query
from extenders.snapshot.summary import ClusterSummary, infos_named
from extenders.snapshot.tally import Contribution

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
    affinity_queries: tuple[PodQuery, ...] = ()  # one per ``affinity`` term, same order
    anti_affinity_queries: tuple[PodQuery, ...] = ()  # one per ``anti_affinity`` term
    # The labels of the incoming pod's namespace, for existing pods' namespaceSelectors (None: unknown).
    namespace_labels: Mapping[str, str] | None = None


def _resolved(
    pod: PodInfo, kind: str, compiled: tuple[AffinityTerm, ...], snapshot: Snapshot, summary: ClusterSummary
) -> tuple[AffinityTerm, ...]:
    """The incoming pod's terms with their namespaceSelectors resolved against the snapshot's Namespaces."""
    return resolve_terms(compiled, required_pod_affinity_terms(pod.affinity, kind), snapshot.namespaces, summary)


def _queries(pod: PodInfo, kind: str, compiled: tuple[AffinityTerm, ...]) -> tuple[PodQuery, ...]:
    raw = required_pod_affinity_terms(pod.affinity, kind)
    return tuple(term_query(term, raw_term) for term, raw_term in zip(compiled, raw, strict=True))


def _bump(counts: dict[Pair, int], pair: Pair, delta: int) -> None:
    value = counts.get(pair, 0) + delta
    if value:
        counts[pair] = value
    else:
        counts.pop(pair, None)


_ANTI_TERMS = "interpod.anti_terms"
AntiTerms = dict[str | None, list[tuple[AffinityTerm, str]]]


def existing_anti_terms(node: NodeInfo) -> AntiTerms:
    """The required anti-affinity terms of the node's pods, with their owner's uid, by namespace.

    Keyed by each namespace a term lists, or None for terms with a namespace selector, so
    an incoming pod only tests the terms that can select its namespace. Kept in
    ``node.derived`` (cleared whenever the node's pods change).
    """
    found: AntiTerms | None = node.derived.get(_ANTI_TERMS)
    if found is None:
        found = by_namespace(
            (term, existing.uid)
            for existing in node.pods_with_required_anti_affinity
            for term in pod_anti_affinity_terms(existing)
        )
        node.derived[_ANTI_TERMS] = found
    return found


def _anti_test(namespace: str) -> Callable[[NodeInfo], bool]:
    """Whether a node holds an anti-affinity term that can select a pod in ``namespace``."""

    def test(node: NodeInfo) -> bool:
        return bool(node.pods_with_required_anti_affinity) and may_select(existing_anti_terms(node), namespace)

    return test


def _add_existing(state: AffinityState, pod: PodInfo, node: NodeInfo, sign: int) -> None:
    """Existing pods' anti-affinity terms on ``node`` that select the incoming pod."""
    facts = node.node
    if facts is None or not node.pods_with_required_anti_affinity:
        return
    by_namespace = existing_anti_terms(node)
    namespace, pod_labels, uid = pod.namespace, pod.labels, pod.uid
    ns_labels = state.namespace_labels
    labels = facts.labels
    for bucket in (by_namespace.get(namespace), by_namespace.get(None)):
        for term, owner_uid in bucket or ():
            if owner_uid == uid:
                continue
            value = labels.get(term.topology_key)
            if value is not None and term.matches(namespace, pod_labels, ns_labels):
                _bump(state.existing_anti_counts, (term.topology_key, value), sign)


def _existing_contribution(namespace: str) -> Callable[[NodeInfo], Contribution]:
    """One node's existing anti-affinity terms that can select a pod of ``namespace``, as (term,
    (topologyKey, value), uid of the pod holding it) items: summed over the cluster by the summary's
    tally, per term (equal terms are one object, see ``compile_affinity_terms``)."""

    def contribution(node: NodeInfo) -> Contribution:
        facts = node.node
        if facts is None or not node.pods_with_required_anti_affinity:
            return ()
        by_namespace = existing_anti_terms(node)
        labels = facts.labels
        out: list[tuple[AffinityTerm, Pair, str]] = []
        for bucket in (by_namespace.get(namespace), by_namespace.get(None)):
            for term, owner_uid in bucket or ():
                value = labels.get(term.topology_key)
                if value is not None:
                    out.append((term, (term.topology_key, value), owner_uid))
        return tuple(out)

    return contribution


def _selecting(
    by_term: Mapping[Any, Mapping[Any, int]], pod: PodInfo, ns_labels: Mapping[str, str] | None
) -> dict[Pair, int]:
    """The counts of the terms that select ``pod``, summed (a group's own dict, read-only, when one does)."""
    namespace, labels = pod.namespace, pod.labels
    selecting = [counts for term, counts in by_term.items() if term.matches(namespace, labels, ns_labels)]
    if len(selecting) == 1:
        return cast(dict[Pair, int], selecting[0])
    total: dict[Pair, int] = {}
    for counts in selecting:
        for pair, count in counts.items():
            total[pair] = total.get(pair, 0) + count
    return total


def _add_own(state: AffinityState, pod: PodInfo, node: NodeInfo, sign: int) -> None:
    """Pods on ``node`` that the incoming pod's own affinity / anti-affinity terms select."""
    facts = node.node
    if facts is None:
        return
    labels = facts.labels
    uid = pod.uid
    affinity, anti = state.affinity, state.anti_affinity
    if affinity:
        rest = affinity[1:]
        matching = 0
        for other in state.affinity_queries[0].pods(node):
            if other.uid != uid and all(t.matches(other.namespace, other.labels) for t in rest):
                matching += 1
        if matching:
            for term in affinity:
                value = labels.get(term.topology_key)
                if value is not None:
                    _bump(state.affinity_counts, (term.topology_key, value), sign * matching)
    for term, query in zip(anti, state.anti_affinity_queries, strict=True):
        value = labels.get(term.topology_key)
        if value is not None:
            matching = query.count(node, uid)
            if matching:
                _bump(state.anti_affinity_counts, (term.topology_key, value), sign * matching)


def _add_node(state: AffinityState, pod: PodInfo, node: NodeInfo, sign: int) -> None:
    """Add (sign=1) or remove (sign=-1) one node's contribution to the counts."""
    _add_existing(state, pod, node, sign)
    if state.affinity or state.anti_affinity:
        _add_own(state, pod, node, sign)


def _finish(state: AffinityState) -> AffinityState:
    state.existing_keys = tuple(sorted({key for key, _ in state.existing_anti_counts}))
    return state


def _counted(counts: Mapping[Pair, int], key: str) -> set[str]:
    """The values of topology key ``key`` with a positive count."""
    return {value for (topology_key, value), count in counts.items() if topology_key == key and count > 0}


class InterPodAffinityFilter:
    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        summary = snapshot.summary()
        affinity = _resolved(pod, "podAffinity", pod_affinity_terms(pod), snapshot, summary)
        anti = _resolved(pod, "podAntiAffinity", pod_anti_affinity_terms(pod), snapshot, summary)
        state = AffinityState(
            affinity=affinity,
            anti_affinity=anti,
            affinity_counts={},
            anti_affinity_counts={},
            existing_anti_counts={},
            existing_keys=(),
            matches_own_affinity=all(t.matches(pod.namespace, pod.labels) for t in affinity),
            affinity_queries=_queries(pod, "podAffinity", affinity),
            anti_affinity_queries=_queries(pod, "podAntiAffinity", anti),
            namespace_labels=namespace_labels(snapshot.namespaces, pod.namespace),
        )
        own_terms = bool(affinity or anti)
        namespace = pod.namespace
        tally = summary.tally(("interpod.existing-anti", namespace), _existing_contribution(namespace))
        if pod.uid in tally.owners:
            # The pod's own terms are in the tally (it is placed already): count without them.
            for node in infos_named(
                snapshot.nodes, summary.names_where(("anti-terms-for", namespace), _anti_test(namespace))
            ):
                _add_existing(state, pod, node, 1)
        else:
            state.existing_anti_counts = _selecting(tally.counts, pod, state.namespace_labels)
        if own_terms:
            # Our own terms: with every term indexed, only nodes holding one of their probe labels.
            probes = [q.probe_keys for q in (*state.affinity_queries[:1], *state.anti_affinity_queries)]
            visit: Iterable[NodeInfo] = snapshot.nodes.values()
            if None not in probes:
                names: set[str] = set()
                for keys in probes:
                    assert keys is not None
                    names.update(summary.names_with_any_label(keys))
                visit = infos_named(snapshot.nodes, names)
            for node in visit:
                _add_own(state, pod, node, 1)
        if not own_terms and not state.existing_anti_counts:
            return SKIP
        return _finish(state)

    def adjust(self, state: Any, pod: PodInfo, old: NodeInfo | None, new: NodeInfo) -> Any:
        if state is SKIP:
            # kube-scheduler runs no PreFilter extension of a plug-in that skipped the pod, so pods
            # added here (nominated ones) are not counted; removing pods cannot create anti-affinity.
            return SKIP
        assert isinstance(state, AffinityState)
        fresh = AffinityState(
            state.affinity,
            state.anti_affinity,
            dict(state.affinity_counts),
            dict(state.anti_affinity_counts),
            dict(state.existing_anti_counts),
            (),
            state.matches_own_affinity,
            state.affinity_queries,
            state.anti_affinity_queries,
            state.namespace_labels,
        )
        if old is not None:
            _add_node(fresh, pod, old, -1)
        _add_node(fresh, pod, new, 1)
        return _finish(fresh)

    def check_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any) -> list[Verdict]:
        """``check`` on every node: the anti-affinity refusals found by label value for all nodes at
        once (a node fails when its value under a term's key has a positive count)."""
        if state.affinity:  # which affinity terms a node satisfies is worked out node by node
            check = self.check
            return [check(pod, node, state) for node in nodes]
        verdicts = [FIT] * len(nodes)
        labels = labels_of(nodes)
        # Existing pods' terms first, so the pod's own terms, which ``check`` looks at first, win.
        existing = state.existing_anti_counts
        for key in state.existing_keys if existing else ():
            for i in positions_in(values_of(labels, key), _counted(existing, key)):
                verdicts[i] = _FAIL_EXISTING
        anti_counts = state.anti_affinity_counts
        for term in state.anti_affinity if anti_counts else ():
            for i in positions_in(values_of(labels, term.topology_key), _counted(anti_counts, term.topology_key)):
                verdicts[i] = _FAIL_ANTI
        return verdicts

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
