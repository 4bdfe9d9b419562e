"""Label selectors, node selector terms and pod affinity terms, with apimachinery's semantics.

Predicates and priorities evaluate the same selectors against thousands of nodes or pods,
so selectors are compiled once into plain closures and the compiled forms are cached.
The cache is keyed by object identity and keeps a strong reference to the selector, so an
id cannot be reused while its entry lives; snapshot objects are never mutated in place.

Semantics (k8s.io/apimachinery labels + component-helpers nodeaffinity):
- a label selector that is ``None`` matches nothing; ``{}`` matches everything;
- ``NotIn`` and ``DoesNotExist`` match when the key is absent;
- a node selector term with no requirements matches nothing; terms are ORed, the
  requirements inside one term ANDed; an empty term list matches nothing;
- ``Gt``/``Lt`` take exactly one integer value and fail on a missing or non-integer label;
- ``matchFields`` supports only ``metadata.name`` with ``In``/``NotIn``.
Invalid selectors (which the API server's validation rejects anyway) raise SelectorError
at compile time, except inside node selector terms, where an invalid term is dropped and
matches nothing, as kube-scheduler's lazy node selector does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from extenders.canonical import canonical_json
from extenders.model import PodInfo

LabelMatcher = Callable[[Mapping[str, str]], bool]
NodeMatcher = Callable[[str, Mapping[str, str]], bool]

NODE_NAME_FIELD = "metadata.name"
_CACHE_LIMIT = 65536


class SelectorError(ValueError):
    """A selector the API server would have refused (unknown operator, bad values)."""


def _match_all(_labels: Mapping[str, str]) -> bool:
    return True


def _match_none(_labels: Mapping[str, str]) -> bool:
    return False


def _node_match_none(_name: str, _labels: Mapping[str, str]) -> bool:
    return False


# ---------------------------------------------------------------- identity cache
_label_cache: dict[int, tuple[object, LabelMatcher]] = {}
_term_cache: dict[int, tuple[object, NodeMatcher]] = {}
_terms_cache: dict[int, tuple[object, NodeMatcher]] = {}


def _cached(cache: dict[int, tuple[object, Any]], obj: object, build: Callable[[], Any]) -> Any:
    entry = cache.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    compiled = build()
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[id(obj)] = (obj, compiled)
    return compiled


# ---------------------------------------------------------------- label selectors
def _requirement(key: str, op: str, values: Sequence[str]) -> LabelMatcher:
    if op == "In":
        if not values:
            raise SelectorError(f"label selector requirement on {key!r}: operator In needs values")
        if len(values) == 1:
            only = values[0]
            return lambda labels: labels.get(key) == only
        allowed = frozenset(values)
        return lambda labels: labels.get(key) in allowed
    if op == "NotIn":
        if not values:
            raise SelectorError(f"label selector requirement on {key!r}: operator NotIn needs values")
        banned = frozenset(values)
        return lambda labels: labels.get(key) not in banned
    if op == "Exists":
        return lambda labels: key in labels
    if op == "DoesNotExist":
        return lambda labels: key not in labels
    raise SelectorError(f"label selector requirement on {key!r}: unknown operator {op!r}")


def _build_label_selector(selector: Mapping[str, Any] | None) -> LabelMatcher:
    if selector is None:
        return _match_none
    match_labels: Mapping[str, str] = selector.get("matchLabels") or {}
    expressions: Sequence[Mapping[str, Any]] = selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return _match_all
    checks: list[LabelMatcher] = []
    pairs = tuple(match_labels.items())
    if len(pairs) == 1:
        ((only_key, only_value),) = pairs
        checks.append(lambda labels: labels.get(only_key) == only_value)
    elif pairs:
        checks.append(lambda labels: all(labels.get(k) == v for k, v in pairs))
    for expr in expressions:
        checks.append(_requirement(expr.get("key") or "", expr.get("operator") or "", expr.get("values") or []))
    if len(checks) == 1:
        return checks[0]
    frozen = tuple(checks)
    return lambda labels: all(check(labels) for check in frozen)


def compile_label_selector(selector: Mapping[str, Any] | None) -> LabelMatcher:
    """A metav1.LabelSelector (JSON) as a function of a label map. None matches nothing."""
    if selector is None:
        return _match_none
    matcher: LabelMatcher = _cached(_label_cache, selector, lambda: _build_label_selector(selector))
    return matcher


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy a metav1.LabelSelector (JSON); None matches nothing."""
    return compile_label_selector(selector)(labels)


# ---------------------------------------------------------------- node selectors
_INT = re.compile(r"^[+-]?[0-9]+$")


def _parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): no spaces or underscores, must fit in int64."""
    if not isinstance(text, str) or not _INT.match(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _node_requirement(key: str, op: str, values: Sequence[str]) -> LabelMatcher:
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"node selector requirement on {key!r}: {op} needs exactly one value")
        bound = _parse_int(values[0])
        if bound is None:
            raise SelectorError(f"node selector requirement on {key!r}: {op} value {values[0]!r} is not an integer")

        def compare(labels: Mapping[str, str]) -> bool:
            raw = labels.get(key)
            if raw is None:
                return False
            number = _parse_int(raw)
            if number is None:
                return False
            return number > bound if op == "Gt" else number < bound

        return compare
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"node selector requirement on {key!r}: {op} takes no values")
    return _requirement(key, op, values)


def _field_requirement(key: str, op: str, values: Sequence[str]) -> Callable[[str], bool]:
    if key != NODE_NAME_FIELD:
        raise SelectorError(f"node selector field {key!r} is not supported (only {NODE_NAME_FIELD})")
    if len(values) != 1:
        raise SelectorError(f"node selector field {key!r} needs exactly one value")
    name = values[0]
    if op == "In":
        return lambda node_name: node_name == name
    if op == "NotIn":
        return lambda node_name: node_name != name
    raise SelectorError(f"node selector field {key!r}: unsupported operator {op!r}")


def _build_term(term: Mapping[str, Any] | None) -> NodeMatcher:
    if not term:
        return _node_match_none
    expressions: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or []
    fields: Sequence[Mapping[str, Any]] = term.get("matchFields") or []
    if not expressions and not fields:
        return _node_match_none
    try:
        label_checks = tuple(
            _node_requirement(e.get("key") or "", e.get("operator") or "", e.get("values") or []) for e in expressions
        )
        field_checks = tuple(
            _field_requirement(f.get("key") or "", f.get("operator") or "", f.get("values") or []) for f in fields
        )
    except SelectorError:
        return _node_match_none

    def match(node_name: str, labels: Mapping[str, str]) -> bool:
        for check in label_checks:
            if not check(labels):
                return False
        return all(check(node_name) for check in field_checks)

    return match


def compile_node_selector_term(term: Mapping[str, Any] | None) -> NodeMatcher:
    """A v1.NodeSelectorTerm as a function of (node name, node labels)."""
    if not term:
        return _node_match_none
    matcher: NodeMatcher = _cached(_term_cache, term, lambda: _build_term(term))
    return matcher


def node_selector_term_matches(term: Mapping[str, Any] | None, node_name: str, labels: Mapping[str, str]) -> bool:
    return compile_node_selector_term(term)(node_name, labels)


def _build_terms(terms: Sequence[Mapping[str, Any]]) -> NodeMatcher:
    compiled = tuple(compile_node_selector_term(t) for t in terms)
    if not compiled:
        return _node_match_none
    if len(compiled) == 1:
        return compiled[0]
    return lambda name, labels: any(c(name, labels) for c in compiled)


def compile_node_selector_terms(terms: Sequence[Mapping[str, Any]] | None) -> NodeMatcher:
    """A list of NodeSelectorTerms, ORed; an empty list matches nothing."""
    if not terms:
        return _node_match_none
    matcher: NodeMatcher = _cached(_terms_cache, terms, lambda: _build_terms(terms))
    return matcher


def compile_node_selector(selector: Mapping[str, Any] | None) -> NodeMatcher:
    """A v1.NodeSelector (``{"nodeSelectorTerms": [...]}``); None or no terms matches nothing."""
    if not selector:
        return _node_match_none
    return compile_node_selector_terms(selector.get("nodeSelectorTerms") or [])


def compile_map_selector(selector: Mapping[str, str] | None) -> LabelMatcher:
    """A plain ``key: value`` map (pod.spec.nodeSelector); empty matches everything."""
    if not selector:
        return _match_all
    pairs = tuple(selector.items())
    return lambda labels: all(labels.get(k) == v for k, v in pairs)


def required_node_affinity_terms(affinity: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The pod's required node affinity terms, or None when the pod has no such requirement.

    An empty list (required affinity present with no terms) is returned as ``[]`` and
    matches nothing, which is what Kubernetes does with it.
    """
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    terms: list[dict[str, Any]] = list(required.get("nodeSelectorTerms") or [])
    return terms


# ---------------------------------------------------------------- pod affinity terms
# Set by the API server on every namespace, to the namespace's name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def is_match_all(matcher: LabelMatcher | None) -> bool:
    """Whether a compiled selector is ``{}`` (matches everything)."""
    return matcher is _match_all


class AffinityTerm:
    """A compiled v1.PodAffinityTerm, relative to the namespace of the pod that owns it.

    A pod is in the term's namespaces when its namespace is listed (``namespaces``: the term's
    list, or the owner's own namespace when neither a list nor a namespaceSelector is set) or
    when its namespace's labels match ``namespace_selector`` (None: the term has none).
    """

    __slots__ = ("namespace_selector", "namespaces", "selector", "topology_key")

    def __init__(
        self,
        topology_key: str,
        namespaces: frozenset[str],
        namespace_selector: LabelMatcher | None,
        selector: LabelMatcher,
    ) -> None:
        self.topology_key = topology_key
        self.namespaces = namespaces
        self.namespace_selector = namespace_selector
        self.selector = selector

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None = None
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected by this term.

        ``namespace_labels`` are the labels of ``namespace``; a namespaceSelector is evaluated on them
        only when the namespace is not listed. When they are not known (None) the namespace is taken
        to carry only the ``kubernetes.io/metadata.name`` label every namespace has.
        """
        if namespace not in self.namespaces:
            ns_selector = self.namespace_selector
            if ns_selector is None:
                return False
            if not ns_selector(namespace_labels if namespace_labels is not None else {NAMESPACE_NAME_LABEL: namespace}):
                return False
        return self.selector(labels)

    def with_namespaces(self, selected: frozenset[str]) -> AffinityTerm:
        """This term with its namespaceSelector replaced by the namespaces it selects (plus the listed ones)."""
        return AffinityTerm(self.topology_key, self.namespaces | selected, None, self.selector)


def compile_affinity_term(term: Mapping[str, Any], owner_namespace: str) -> AffinityTerm:
    """Namespaces default to the owner's own when neither ``namespaces`` nor a namespaceSelector is set."""
    listed = term.get("namespaces") or []
    ns_selector_json = term.get("namespaceSelector")
    # With neither a list nor a selector the term means the owner's namespace.
    namespaces = frozenset({owner_namespace}) if not listed and ns_selector_json is None else frozenset(listed)
    return AffinityTerm(
        term.get("topologyKey") or "",
        namespaces,
        None if ns_selector_json is None else compile_label_selector(ns_selector_json),
        compile_label_selector(term.get("labelSelector")),
    )


_affinity_cache: dict[int, tuple[object, str, tuple[AffinityTerm, ...]]] = {}
# Equal terms of one owner namespace compile to one object, so per-term aggregates (see
# extenders.plugins.inter_pod_affinity.filtering) group the many pods of one workload by identity.
_interned: dict[tuple[bytes, str], AffinityTerm] = {}


def _interned_term(term: Mapping[str, Any], owner_namespace: str) -> AffinityTerm:
    key = (canonical_json(term), owner_namespace)
    found = _interned.get(key)
    if found is None:
        found = compile_affinity_term(term, owner_namespace)
        if len(_interned) >= _CACHE_LIMIT:
            _interned.clear()
        _interned[key] = found
    return found


def compile_affinity_terms(terms: Sequence[Mapping[str, Any]] | None, owner_namespace: str) -> tuple[AffinityTerm, ...]:
    """A list of PodAffinityTerms, compiled once per (list object, owner namespace)."""
    if not terms:
        return ()
    entry = _affinity_cache.get(id(terms))
    if entry is not None and entry[0] is terms and entry[1] == owner_namespace:
        return entry[2]
    compiled = tuple(_interned_term(t, owner_namespace) for t in terms)
    if len(_affinity_cache) >= _CACHE_LIMIT:
        _affinity_cache.clear()
    _affinity_cache[id(terms)] = (terms, owner_namespace, compiled)
    return compiled


def required_pod_affinity_terms(affinity: Mapping[str, Any] | None, kind: str) -> list[dict[str, Any]]:
    """Required terms of ``podAffinity`` or ``podAntiAffinity`` (``kind``) from a pod's affinity."""
    section = (affinity or {}).get(kind) or {}
    terms: list[dict[str, Any]] = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return terms


def compile_required_node_affinity(pod: PodInfo) -> NodeMatcher | None:
    """The pod's nodeSelector and required node affinity as one matcher; None when neither is set."""
    terms = required_node_affinity_terms(pod.affinity)
    if not pod.node_selector and terms is None:
        return None
    map_match = compile_map_selector(pod.node_selector)
    if terms is None:
        return lambda _name, labels: map_match(labels)
    terms_match = compile_node_selector_terms(terms)
    if not pod.node_selector:
        return terms_match

    def both(name: str, labels: Mapping[str, str]) -> bool:
        return map_match(labels) and terms_match(name, labels)

    return both
