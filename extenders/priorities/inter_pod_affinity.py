"""InterPodAffinity (scoring): preferred pod affinity and anti-affinity, in both directions.

For every existing pod E on a labelled node N, and the incoming pod P, the weight of each
matching term is added to (or, for anti-affinity, taken from) the topology domain of N:
P's preferred terms matching E; E's preferred terms matching P; and E's *required*
affinity terms matching P, with ``ctx.hard_pod_affinity_symmetric_weight`` (when > 0).
A candidate's raw score is the sum over its domains; normalised min-max to 0..MAX.

When P has no preferred terms only pods with affinity terms can contribute, so prepare
visits only ``NodeInfo.pods_with_affinity``, not every pod. With nothing to count every
node scores 0 (the plugin skips the pod). An existing pod with the incoming pod's uid (an
assumed copy of itself) is not counted, so a pod never attracts itself.

Terms are compiled by ``extenders.labels`` exactly as the MatchInterPodAffinity filter
compiles them (namespace defaulting, and namespace selectors: ``{}`` selects all, one on
``kubernetes.io/metadata.name`` is exact, any other selects none: no Namespace objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extenders.labels import AffinityTerm, SelectorError, compile_affinity_term
from extenders.model import NodeInfo, PodInfo
from extenders.priorities.base import ScoringContext, register
from extenders.priorities.normalize import constant, min_max
from extenders.snapshot import Snapshot

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


TopologyScore = dict[str, dict[str, float]]  # topology key -> domain value -> score


def _add(scores: TopologyScore, key: str, labels: Mapping[str, str], amount: float) -> None:
    value = labels.get(key)
    if value is None:
        return
    domain = scores.setdefault(key, {})
    domain[value] = domain.get(value, 0.0) + amount


class InterPodAffinity:
    name = "InterPodAffinity"

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> TopologyScore | None:
        own = pod_terms(pod).preferred
        hard_weight = ctx.hard_pod_affinity_symmetric_weight
        namespace, pod_labels = pod.namespace, pod.labels
        scores: TopologyScore = {}
        for info in snapshot.nodes.values():
            facts = info.node
            if facts is None or not facts.labels:
                continue
            existing = info.pods.values() if own else info.pods_with_affinity
            if not existing:
                continue
            labels = facts.labels
            for other in existing:
                if other.uid == pod.uid:
                    continue  # the pod itself, e.g. still assumed somewhere
                for weight, term in own:
                    if term.matches(other.namespace, other.labels):
                        _add(scores, term.topology_key, labels, weight)
                if not other.has_pod_affinity():
                    continue
                theirs = cached_pod_terms(other)
                if hard_weight > 0:
                    for term in theirs.required_affinity:
                        if term.matches(namespace, pod_labels):
                            _add(scores, term.topology_key, labels, hard_weight)
                for weight, term in theirs.preferred:
                    if term.matches(namespace, pod_labels):
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

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        if state is None:
            return constant(raw)
        return min_max(raw)


register(InterPodAffinity())
