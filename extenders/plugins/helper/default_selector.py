"""The selector kube-scheduler's spreading uses for a pod that declares none (helper.DefaultSelector).

It groups the pod with the pods of its Services and of its controller:

- every Service of the pod's namespace whose ``spec.selector`` is not empty and matches the pod's
  labels contributes its selector map (the maps are merged: they all match the pod, so they agree);
- when the pod's controlling owner reference (``controller: true``) names a ReplicationController
  (``v1``), its selector map is merged in the same way; when it names a ReplicaSet or a StatefulSet
  (``apps/v1``), that object's LabelSelector is added as further requirements. The object is looked
  up by the pod's namespace and the reference's name; one the snapshot does not hold, one without a
  selector, or one whose selector is invalid adds nothing.

No requirement at all means no selector (None): PodTopologySpread then applies no system-default
constraint, and SelectorSpread counts nothing. The result is a metav1.LabelSelector (JSON): the
merged map as ``matchLabels``, a ReplicaSet's or StatefulSet's requirements as ``matchExpressions``
(its ``matchLabels`` as ``In`` with one value, so a key the map holds too is required twice rather
than overwritten, as in kube-scheduler).

``default_query`` is what the scorers call: the selector as a ``PodQuery`` over the pod's namespace,
remembered while the snapshot's four tables are the same objects (the replica cache keeps a table's
object until that table changes), keyed by what the selector depends on (namespace, labels,
controller reference): pods of one template, and the two scorers of one call, share one lookup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extenders.labels import SelectorError, compile_label_selector
from extenders.model import ControllerInfo, PodInfo, ServiceInfo
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery, namespace_query

_CORE_V1 = ("", "v1")
_APPS_V1 = ("apps", "v1")
_MEMO_LIMIT = 4096
_MEMO_KEY = "default-selector"  # ClusterSummary.derived key: the memo lives as long as the Service table

ServiceSelectors = Mapping[str, Sequence[Mapping[str, str]]]  # namespace -> non-empty service selectors


def _group_version(api_version: str) -> tuple[str, str] | None:
    """``group/version`` split as the API machinery parses it; None for a malformed one."""
    if api_version in ("", "/"):
        return ("", "")
    slashes = api_version.count("/")
    if slashes == 0:
        return ("", api_version)
    if slashes == 1:
        group, _, version = api_version.partition("/")
        return (group, version)
    return None


def service_selectors(services: Mapping[str, ServiceInfo]) -> dict[str, list[Mapping[str, str]]]:
    """The non-empty selector maps of ``services``, by namespace (empty ones match no extra pods)."""
    out: dict[str, list[Mapping[str, str]]] = {}
    for service in services.values():
        if service.selector:
            out.setdefault(service.namespace, []).append(service.selector)
    return out


def _owner_table(pod: PodInfo, snapshot: Snapshot) -> tuple[Mapping[str, ControllerInfo], bool] | None:
    """The table the pod's controller is looked up in, and whether its selector is a plain map."""
    owner = pod.owner
    if owner is None or not owner.controller:
        return None
    group_version = _group_version(owner.api_version)
    kind = owner.kind
    if group_version == _CORE_V1 and kind == "ReplicationController":
        return snapshot.replication_controllers, True
    if group_version == _APPS_V1 and kind == "ReplicaSet":
        return snapshot.replica_sets, False
    if group_version == _APPS_V1 and kind == "StatefulSet":
        return snapshot.stateful_sets, False
    return None


def _requirements(selector: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A LabelSelector's requirements as expressions; none when it is missing or invalid."""
    if selector is None:
        return []
    try:
        compile_label_selector(selector)  # raises on what the API machinery refuses
    except SelectorError:
        return []
    for expression in selector.get("matchExpressions") or []:
        if expression.get("operator") in ("Exists", "DoesNotExist") and expression.get("values"):
            return []  # refused too: these take no values
    match_labels = selector.get("matchLabels") or {}
    return [
        *({"key": k, "operator": "In", "values": [v]} for k, v in match_labels.items()),
        *(dict(e) for e in selector.get("matchExpressions") or []),
    ]


def build_default_selector(
    pod: PodInfo, snapshot: Snapshot, by_namespace: ServiceSelectors | None = None
) -> dict[str, Any] | None:
    """The pod's default spreading selector (see the module docstring), or None when it has no
    requirement. ``by_namespace``: ``service_selectors(snapshot.services)``, when already built."""
    if by_namespace is None:
        by_namespace = service_selectors(snapshot.services)
    labels = pod.labels
    merged: dict[str, str] = {}
    for selector in by_namespace.get(pod.namespace, ()):
        if all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    expressions: list[dict[str, Any]] = []
    found = _owner_table(pod, snapshot)
    if found is not None:
        table, plain_map = found
        assert pod.owner is not None
        controller = table.get(f"{pod.namespace}/{pod.owner.name}")
        if controller is not None and plain_map:
            merged.update(controller.selector or {})
        elif controller is not None:
            expressions = _requirements(controller.selector)
    if not merged and not expressions:
        return None
    out: dict[str, Any] = {}
    if merged:
        out["matchLabels"] = merged
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _query(pod: PodInfo, selector: dict[str, Any] | None) -> PodQuery | None:
    if selector is None:
        return None
    return namespace_query(pod.namespace, selector, compile_label_selector(selector))


class _Memo:
    """Default queries of one set of tables (a sealed snapshot's), keyed by what they depend on."""

    __slots__ = ("by_namespace", "queries", "tables")

    def __init__(self) -> None:
        self.tables: tuple[object, ...] = ()
        self.by_namespace: dict[str, list[Mapping[str, str]]] | None = None
        self.queries: dict[tuple[Any, ...], PodQuery | None] = {}

    def query(self, pod: PodInfo, snapshot: Snapshot) -> PodQuery | None:
        tables = (snapshot.services, snapshot.replication_controllers, snapshot.replica_sets, snapshot.stateful_sets)
        current = self.tables
        if len(current) != 4 or any(a is not b for a, b in zip(current, tables, strict=True)):
            self.tables, self.by_namespace, self.queries = tables, None, {}
        owner = pod.owner
        key = (
            pod.namespace,
            frozenset(pod.labels.items()),
            None if owner is None or not owner.controller else (owner.api_version, owner.kind, owner.name),
        )
        queries = self.queries
        if key in queries:
            return queries[key]
        if self.by_namespace is None:
            self.by_namespace = service_selectors(snapshot.services)
        query = _query(pod, build_default_selector(pod, snapshot, self.by_namespace))
        if len(queries) >= _MEMO_LIMIT:
            queries.clear()
        queries[key] = query
        return query


def default_query(pod: PodInfo, snapshot: Snapshot) -> PodQuery | None:
    """The pod's default selector as a query over its namespace's pods; None when it has none.

    Remembered only for sealed snapshots (never changed in place); an unsealed one is read afresh.
    """
    if not (snapshot.services or snapshot.replication_controllers or snapshot.replica_sets or snapshot.stateful_sets):
        return None
    if not snapshot.sealed:
        return _query(pod, build_default_selector(pod, snapshot))
    memo = snapshot.summary().derived(_MEMO_KEY, snapshot.services, _Memo)
    return memo.query(pod, snapshot)
