"""Which of a node's pods a label selector picks, read from ``NodeInfo.pods_by_label``.

Spreading and inter-pod affinity count, over thousands of nodes, the pods a selector
matches. A selector with an equality requirement (a ``matchLabels`` pair, an ``In``
expression, a ``matchLabelKeys`` key) can only match pods carrying one of a few
(namespace, key, value) labels, so a query reads those index buckets and tests only the
pods in them against the full selector; a node holding none of them costs one dict
lookup. A selector without an equality requirement (only ``Exists``/``NotIn``/
``DoesNotExist``, or ``{}``), or a term whose namespaces are open-ended (a namespaceSelector
not resolved to names, ``{}``, or more names than ``MAX_INDEXED_NAMESPACES``), falls back to
scanning the node's pods with the full test. Queries return matching pods
including terminating ones and the incoming pod itself: callers apply their own rules.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from extenders.labels import AffinityTerm
from extenders.model import LabelKey, NodeInfo, PodInfo, label_key

# More namespaces than this and a term's query scans instead: each namespace is a set of index
# keys, and the first use of a key walks every node (see ClusterSummary.names_with_label).
MAX_INDEXED_NAMESPACES = 64

# (namespace, labels) -> whether a pod there with those labels is selected.
PodMatch = Callable[[str, Mapping[str, str]], bool]
Equality = tuple[str, tuple[str, ...]]  # label key, the values it may take


def selector_equalities(selector: Mapping[str, Any] | None) -> list[Equality]:
    """The requirements of a metav1.LabelSelector (JSON) that pin a key to a few values.

    Every pod the selector matches satisfies each of them. Requirements the API server
    would refuse are not read here (compiling the selector raises on them first).
    """
    if not selector:
        return []
    out: list[Equality] = [(k, (v,)) for k, v in (selector.get("matchLabels") or {}).items() if isinstance(v, str)]
    for expr in selector.get("matchExpressions") or []:
        values = expr.get("values") or []
        if expr.get("operator") == "In" and values and all(isinstance(v, str) for v in values):
            out.append((expr.get("key") or "", tuple(dict.fromkeys(values))))
    return out


def is_single_equality(selector: Mapping[str, Any] | None) -> bool:
    """Whether the selector is exactly one equality requirement (so index hits need no re-test)."""
    if not selector:
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if len(match_labels) + len(expressions) != 1:
        return False
    return len(selector_equalities(selector)) == 1


class PodQuery:
    """One selector over one set of namespaces, prepared once and run against many nodes.

    ``match`` is the complete test; ``namespaces`` the namespaces it can accept (None when
    a namespace selector makes that open-ended; empty when it selects nothing);
    ``equalities`` requirements every match satisfies. With ``exact`` the equalities
    (exactly one) and namespaces are the whole test, so index hits are not re-tested.
    """

    __slots__ = ("_exact", "_lookups", "_match", "_single", "probe", "probe_keys")

    def __init__(
        self,
        match: PodMatch,
        namespaces: Collection[str] | None,
        equalities: Sequence[Equality],
        exact: bool = False,
    ) -> None:
        self._match = match
        self._exact = exact and len(equalities) == 1
        # Per namespace, per requirement: the index keys of its allowed values.
        self._lookups: tuple[tuple[tuple[LabelKey, ...], ...], ...] | None = None
        self._single: LabelKey | None = None
        # An index key every selected pod carries, when there is one: a node without it in
        # ``pods_by_label`` has no match (a cheap inline test for loops over every node).
        self.probe: LabelKey | None = None
        # Index keys of which every selected pod carries at least one (None: no such set):
        # per namespace, those of its requirement with the fewest values.
        self.probe_keys: tuple[LabelKey, ...] | None = None
        if namespaces is None or (namespaces and not equalities):
            return
        self._lookups = tuple(
            tuple(tuple(label_key(ns, key, value) for value in values) for key, values in equalities)
            for ns in sorted(namespaces)
        )
        self.probe_keys = tuple(key for per_namespace in self._lookups for key in min(per_namespace, key=len))
        if len(self._lookups) == 1:
            self.probe = next((keys[0] for keys in self._lookups[0] if len(keys) == 1), None)
            if len(self._lookups[0]) == 1 and self.probe is not None:
                self._single = self.probe

    @property
    def indexed(self) -> bool:
        """False when every node is scanned (no equality requirement or open namespaces)."""
        return self._lookups is not None

    def pods(self, node: NodeInfo) -> Sequence[PodInfo]:
        """The node's pods the query selects (terminating ones and the incoming pod included)."""
        single = self._single
        if single is not None:
            bucket = node.pods_by_label.get(single)
            if not bucket:
                return ()
            if self._exact:
                return bucket
            match = self._match
            return [p for p in bucket if match(p.namespace, p.labels)]
        lookups = self._lookups
        match = self._match
        if lookups is None:
            return [p for p in node.pods.values() if match(p.namespace, p.labels)]
        index = node.pods_by_label
        if not index:
            return ()
        out: list[PodInfo] = []
        for per_namespace in lookups:
            best: list[PodInfo] | None = None
            for keys in per_namespace:
                candidates = _bucket(index, keys)
                if not candidates:
                    best = None
                    break
                if best is None or len(candidates) < len(best):
                    best = candidates
            if not best:
                continue
            if self._exact:
                out.extend(best)
            else:
                out.extend(p for p in best if match(p.namespace, p.labels))
        return out

    def count(self, node: NodeInfo, skip_uid: str = "", live_only: bool = False) -> int:
        """How many selected pods, leaving out ``skip_uid`` and, with ``live_only``, terminating ones."""
        n = 0
        for pod in self.pods(node):
            if pod.uid != skip_uid and not (live_only and pod.deletion_timestamp is not None):
                n += 1
        return n


def _bucket(index: Mapping[LabelKey, list[PodInfo]], keys: tuple[LabelKey, ...]) -> list[PodInfo] | None:
    if len(keys) == 1:
        return index.get(keys[0])
    out: list[PodInfo] = []
    for key in keys:  # one label value per key, so the buckets are disjoint
        bucket = index.get(key)
        if bucket:
            out.extend(bucket)
    return out


def namespace_query(
    namespace: str,
    selector: Mapping[str, Any] | None,
    matcher: Callable[[Mapping[str, str]], bool],
    extra: Iterable[tuple[str, str]] = (),
) -> PodQuery:
    """Pods of one namespace matching ``selector`` (compiled as ``matcher``) and the ``extra`` pairs.

    ``matcher`` must already include the ``extra`` pairs (e.g. folded-in matchLabelKeys).
    """
    extra_pairs = list(extra)
    if selector is None:  # selects nothing
        return PodQuery(lambda _ns, _labels: False, (), ())
    equalities = [*selector_equalities(selector), *((k, (v,)) for k, v in extra_pairs)]
    exact = not extra_pairs and is_single_equality(selector)

    def match(ns: str, labels: Mapping[str, str]) -> bool:
        return ns == namespace and matcher(labels)

    return PodQuery(match, (namespace,), equalities, exact)


def term_query(term: AffinityTerm, raw: Mapping[str, Any]) -> PodQuery:
    """Pods an inter-pod affinity term selects; ``raw`` is the PodAffinityTerm JSON ``term`` was compiled from."""
    selector = raw.get("labelSelector")
    if selector is None:  # selects nothing
        return PodQuery(term.matches, (), ())
    namespaces = None if term.namespace_selector is not None else term.namespaces
    if namespaces is not None and len(namespaces) > MAX_INDEXED_NAMESPACES:
        namespaces = None
    return PodQuery(term.matches, namespaces, selector_equalities(selector), is_single_equality(selector))
