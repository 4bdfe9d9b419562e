"""InterPodAffinity (scoring): preferred pod affinity and anti-affinity, in both directions.

For every existing pod E on a labelled node N, and the incoming pod P, the weight of each
matching term is added to (or, for anti-affinity, taken from) the topology domain of N:
P's preferred terms matching E; E's preferred terms matching P; and E's *required*
affinity terms matching P, with ``ctx.hard_pod_affinity_symmetric_weight`` (when > 0).
A candidate's raw score is the sum over its domains; normalised min-max to 0..MAX.

P's own terms are counted through the nodes' label index (``pod_query``), visiting only
nodes that may hold a pod they select (``cluster_summary``); the other two directions only concern pods with
affinity terms, so prepare visits only ``NodeInfo.pods_with_affinity``, not every pod. With nothing to count every
node scores 0 (the plugin skips the pod). An existing pod with the incoming pod's uid (an
assumed copy of itself) is not counted, so a pod never attracts itself.

Terms are compiled by ``extenders.labels`` exactly as the MatchInterPodAffinity filter
compiles them, and namespaceSelectors are resolved the same way (``terms``): P's against the
snapshot's Namespaces, E's against the labels of P's namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extenders.labels import AffinityTerm, SelectorError, compile_affinity_term
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ConstantScore, ScoringContext, summary_of
from extenders.plugins.helper.normalize import constant, min_max
from extenders.plugins.inter_pod_affinity.terms import (
    NamespaceTable,
    by_namespace,
    may_select,
    namespace_labels,
    resolve_term,
)
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery, term_query
from extenders.snapshot.summary import ClusterSummary, infos_named

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

WeightedTerm = tuple[int, AffinityTerm]  # signed weight: negative for anti-affinity


def _compile(owner: PodInfo, term: Mapping[str, Any]) -> AffinityTerm | None:
    """The filter's compiled form of a term, so filter and scoring agree; None if invalid."""
    try:
        return compile_affinity_term(term, owner.namespace)
    except SelectorError:
        return None


def _weighted(owner: PodInfo, section: Mapping[str, Any] | None, sign: int) -> list[WeightedTerm]:
    out: list[WeightedTerm] = []
    for weighted in (section or {}).get(PREFERRED) or []:
        weight = int(weighted.get("weight") or 0)
        term = _compile(owner, weighted.get("podAffinityTerm") or {}) if weight else None
        if term is not None:
            out.append((sign * weight, term))
    return out


@dataclass(slots=True, frozen=True)
class PodTerms:
    """A pod's scoring-relevant terms: preferred (signed weights) and required affinity."""

    preferred: tuple[WeightedTerm, ...]
    required_affinity: tuple[AffinityTerm, ...]


def pod_terms(pod: PodInfo) -> PodTerms:
    affinity = pod.affinity
    pod_affinity = affinity.get("podAffinity") or {}
    preferred = [
        *_weighted(pod, pod_affinity, 1),
        *_weighted(pod, affinity.get("podAntiAffinity"), -1),
    ]
    required = [t for t in (_compile(pod, raw) for raw in pod_affinity.get(REQUIRED) or []) if t is not None]
    return PodTerms(tuple(preferred), tuple(required))


_terms_cache: dict[int, tuple[PodInfo, PodTerms]] = {}
_CACHE_LIMIT = 65536


def cached_pod_terms(pod: PodInfo) -> PodTerms:
    """pod_terms for an existing pod, cached by identity (snapshot pods are never mutated)."""
    entry = _terms_cache.get(id(pod))
    if entry is not None and entry[0] is pod:
        return entry[1]
    terms = pod_terms(pod)
    if len(_terms_cache) >= _CACHE_LIMIT:
        _terms_cache.clear()
    _terms_cache[id(pod)] = (pod, terms)
    return terms


def own_queries(
    pod: PodInfo, namespaces: NamespaceTable, summary: ClusterSummary | None = None
) -> list[tuple[int, AffinityTerm, PodQuery]]:
    """The pod's preferred terms (signed weight, term) with their index queries, namespaceSelectors
    resolved against ``namespaces`` (the snapshot's, whose ``summary`` keeps the selections)."""
    out: list[tuple[int, AffinityTerm, PodQuery]] = []
    affinity = pod.affinity
    for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1)):
        for weighted in (affinity.get(kind) or {}).get(PREFERRED) or []:
            weight = int(weighted.get("weight") or 0)
            raw = weighted.get("podAffinityTerm") or {}
            term = _compile(pod, raw) if weight else None
            if term is not None:
                term = resolve_term(term, raw, namespaces, summary)
                out.append((sign * weight, term, term_query(term, raw)))
    return out


# namespace a term selects (None: by namespace selector) -> (term, weight or None for a
# required affinity term, owner uid)
ScoringTerms = dict[str | None, list[tuple[AffinityTerm, int | None, str]]]
_SCORING_TERMS = "interpod.scoring_terms"


def existing_scoring_terms(node: NodeInfo) -> ScoringTerms:
    """The node's pods' preferred and required affinity terms, by the namespace they select.

    Kept in ``node.derived`` (cleared whenever the node's pods change).
    """
    found: ScoringTerms | None = node.derived.get(_SCORING_TERMS)
    if found is None:
        entries: list[tuple[AffinityTerm, int | None, str]] = []
        for other in node.pods_with_affinity:
            theirs = cached_pod_terms(other)
            entries.extend((term, None, other.uid) for term in theirs.required_affinity)
            entries.extend((term, weight, other.uid) for weight, term in theirs.preferred)
        found = by_namespace(entries)
        node.derived[_SCORING_TERMS] = found
    return found


def _terms_test(namespace: str) -> Callable[[NodeInfo], bool]:
    """Whether a node holds a scoring term that can select a pod in ``namespace``."""

    def test(node: NodeInfo) -> bool:
        return bool(node.pods_with_affinity) and may_select(existing_scoring_terms(node), namespace)

    return test


TopologyScore = dict[str, dict[str, float]]  # topology key -> domain value -> score


def _add(scores: TopologyScore, key: str, labels: Mapping[str, str], amount: float) -> None:
    value = labels.get(key)
    if value is None:
        return
    domain = scores.setdefault(key, {})
    domain[value] = domain.get(value, 0.0) + amount


class InterPodAffinityScorer:
    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> TopologyScore | None:
        hard_weight = ctx.hard_pod_affinity_symmetric_weight
        namespace, pod_labels, uid = pod.namespace, pod.labels, pod.uid
        scores: TopologyScore = {}
        summary = summary_of(snapshot, ctx)
        for weight, term, query in own_queries(pod, snapshot.namespaces, summary):
            probes = query.probe_keys
            infos: Iterable[NodeInfo] = (
                snapshot.nodes.values()
                if probes is None
                else infos_named(snapshot.nodes, summary.names_with_any_label(probes))
            )
            for info in infos:
                facts = info.node
                if facts is None or not facts.labels:
                    continue
                matching = query.count(info, uid)
                if matching:
                    _add(scores, term.topology_key, facts.labels, weight * matching)
        # Existing pods' terms: only nodes holding a term that can select our namespace.
        holders = summary.names_where(("scoring-terms-for", namespace), _terms_test(namespace))
        ns_labels = namespace_labels(snapshot.namespaces, namespace)
        for info in infos_named(snapshot.nodes, holders):
            facts = info.node
            if facts is None or not facts.labels:
                continue
            labels = facts.labels
            by_namespace = existing_scoring_terms(info)
            for bucket in (by_namespace.get(namespace), by_namespace.get(None)):
                for term, preferred_weight, owner_uid in bucket or ():
                    if owner_uid == uid:
                        continue  # the pod itself, e.g. still assumed somewhere
                    # None marks a required affinity term, weighted by the policy.
                    weight = hard_weight if preferred_weight is None else preferred_weight
                    if weight and term.matches(namespace, pod_labels, ns_labels):
                        _add(scores, term.topology_key, labels, weight)
        return scores or None

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or node.node is None:
            return 0.0
        labels = node.node.labels
        total = 0.0
        for key, domains in state.items():
            value = labels.get(key)
            if value is not None:
                total += domains.get(value, 0.0)
        return total

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return (0.0, 0.0) if state is None else None  # nothing to count

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        if state is None:
            return constant(raw)
        return min_max(raw)
