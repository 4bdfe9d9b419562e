"""A deliberately plain reference implementation of the filter predicates, for differential tests.

Written from the Kubernetes semantics directly over raw v1.Pod / v1.Node JSON, by brute
force (every check rescans the cluster), sharing nothing with ``extenders.plugins`` or
``extenders.labels``: only quantity parsing is borrowed. Slow on purpose; small clusters only.
Reasons are worded as the newest kube-scheduler release words them (the engine's default release):
e.g. TaintToleration names no taint, as from 1.34.2.
"""

from __future__ import annotations

from typing import Any

from extenders.quantity import resource_amount
from tests.reference_reading import (
    Json,
    conditions,
    hard_taints,
    host_ports,
    labels_of,
    name_of,
    namespace_of,
    node_affinity_ok,
    pod_requests,
    selector_matches,
    tolerated,
)

Result = tuple[bool, str, bool]  # fit, reason, unresolvable
OK: Result = (True, "", False)

NOT_FOUND = "node(s) not found in the extender's snapshot"


# ------------------------------------------------------------------ the cluster view
class Cluster:
    def __init__(self, nodes: list[Json], pods: list[Json]) -> None:
        self.nodes = {name_of(n): n for n in nodes}
        self.pods = pods

    def pods_on(self, node_name: str) -> list[Json]:
        return [p for p in self.pods if (p.get("spec") or {}).get("nodeName") == node_name]

    def placed(self) -> list[tuple[Json, Json]]:
        """(pod, node) for every pod on a node that exists."""
        out = []
        for pod in self.pods:
            node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is not None:
                out.append((pod, node))
        return out


# ------------------------------------------------------------------ predicates
def pod_fits_resources(pod: Json, node: Json, cluster: Cluster) -> Result:
    alloc = {k: resource_amount(k, v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    on_node = cluster.pods_on(name_of(node))
    used: dict[str, int] = {}
    for other in on_node:
        for k, v in pod_requests(other).items():
            used[k] = used.get(k, 0) + v
    reasons = []
    unresolvable = False
    if len(on_node) + 1 > alloc.get("pods", 0):
        reasons.append("Too many pods")
    want = pod_requests(pod)
    ordered: list[str] = [r for r in ("cpu", "memory", "ephemeral-storage") if r in want]
    ordered += sorted(r for r in want if r not in ("cpu", "memory", "ephemeral-storage", "pods"))
    for resource in ordered:
        amount = want[resource]
        if amount > 0 and amount > alloc.get(resource, 0) - used.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
            if amount > alloc.get(resource, 0):
                unresolvable = True
    if reasons:
        return (False, ", ".join(reasons), unresolvable)
    return OK


def pod_fits_host(pod: Json, node: Json, cluster: Cluster) -> Result:
    wanted = (pod.get("spec") or {}).get("nodeName")
    if wanted and wanted != name_of(node):
        return (False, "node(s) didn't match the requested node name", True)
    return OK


def pod_fits_host_ports(pod: Json, node: Json, cluster: Cluster) -> Result:
    used = [p for other in cluster.pods_on(name_of(node)) for p in host_ports(other)]
    for proto, ip, port in host_ports(pod):
        for u_proto, u_ip, u_port in used:
            if proto == u_proto and port == u_port and (ip == u_ip or "0.0.0.0" in (ip, u_ip)):
                return (False, "node(s) didn't have free ports for the requested pod ports", False)
    return OK


def match_node_selector(pod: Json, node: Json, cluster: Cluster) -> Result:
    if node_affinity_ok(pod, node):
        return OK
    return (False, "node(s) didn't match Pod's node affinity/selector", True)


def pod_tolerates_node_taints(pod: Json, node: Json, cluster: Cluster) -> Result:
    for taint in hard_taints(node):
        if not tolerated(pod, taint):
            return (False, "node(s) had untolerated taint(s)", True)
    return OK


def check_node_unschedulable(pod: Json, node: Json, cluster: Cluster) -> Result:
    if (node.get("spec") or {}).get("unschedulable") and not tolerated(
        pod, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return (False, "node(s) were unschedulable", True)
    return OK


def check_node_condition(pod: Json, node: Json, cluster: Cluster) -> Result:
    conds = conditions(node)
    reasons = []
    if "Ready" in conds and conds["Ready"] != "True":
        reasons.append("node(s) were not ready")
    if conds.get("NetworkUnavailable") == "True":
        reasons.append("node(s) had unavailable network")
    return (False, ", ".join(reasons), True) if reasons else OK


def _is_best_effort(pod: Json) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        for section in ("requests", "limits"):
            if any(k in (res.get(section) or {}) for k in ("cpu", "memory")):
                return False
    return True


def _pressure(condition: str, taint_key: str, reason: str, best_effort_only: bool = False) -> Any:
    def check(pod: Json, node: Json, cluster: Cluster) -> Result:
        if best_effort_only and not _is_best_effort(pod):
            return OK
        if tolerated(pod, {"key": taint_key, "effect": "NoSchedule", "value": ""}):
            return OK
        if conditions(node).get(condition) == "True":
            return (False, reason, True)
        return OK

    return check


def _term_namespaces_match(term: Json, owner_ns: str, ns: str) -> bool:
    listed = term.get("namespaces") or []
    ns_sel = term.get("namespaceSelector")
    if not listed and ns_sel is None:
        return ns == owner_ns
    if ns in listed:
        return True
    if ns_sel is None:
        return False
    keys = set((ns_sel.get("matchLabels") or {}).keys()) | {e["key"] for e in ns_sel.get("matchExpressions") or []}
    if not keys:
        return True
    if keys != {"kubernetes.io/metadata.name"}:
        return False
    return selector_matches(ns_sel, {"kubernetes.io/metadata.name": ns})


def term_selects(term: Json, owner: Json, pod: Json) -> bool:
    return _term_namespaces_match(term, namespace_of(owner), namespace_of(pod)) and selector_matches(
        term.get("labelSelector"), labels_of(pod)
    )


def _required(pod: Json, kind: str) -> list[Json]:
    section = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    terms: list[Json] = section.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return terms


def match_inter_pod_affinity(pod: Json, node: Json, cluster: Cluster) -> Result:
    labels = labels_of(node)
    placed = cluster.placed()
    affinity = _required(pod, "podAffinity")
    if affinity:
        if any(t["topologyKey"] not in labels for t in affinity):
            return (False, "node(s) didn't match pod affinity rules", True)
        matching = [(p, n) for p, n in placed if all(term_selects(t, pod, p) for t in affinity)]
        satisfied = all(
            any(labels_of(n).get(t["topologyKey"]) == labels[t["topologyKey"]] for _p, n in matching) for t in affinity
        )
        if not satisfied:
            nobody = not any(any(t["topologyKey"] in labels_of(n) for t in affinity) for _p, n in matching)
            self_match = all(term_selects(t, pod, pod) for t in affinity)
            if not (nobody and self_match):
                return (False, "node(s) didn't match pod affinity rules", True)
    for term in _required(pod, "podAntiAffinity"):
        key = term["topologyKey"]
        if key not in labels:
            continue
        for other, other_node in placed:
            if labels_of(other_node).get(key) == labels[key] and term_selects(term, pod, other):
                return (False, "node(s) didn't match pod anti-affinity rules", False)
    for other, other_node in placed:
        for term in _required(other, "podAntiAffinity"):
            key = term["topologyKey"]
            if key in labels and labels_of(other_node).get(key) == labels[key] and term_selects(term, other, pod):
                return (False, "node(s) didn't satisfy existing pods anti-affinity rules", False)
    return OK


def pod_topology_spread(pod: Json, node: Json, cluster: Cluster) -> Result:
    spec = pod.get("spec") or {}
    constraints = [c for c in spec.get("topologySpreadConstraints") or [] if c["whenUnsatisfiable"] == "DoNotSchedule"]
    if not constraints:
        return OK
    labels = labels_of(node)
    keys = [c["topologyKey"] for c in constraints]
    for c in constraints:
        if c["topologyKey"] not in labels:
            return (False, "node(s) didn't match pod topology spread constraints (missing required label)", True)
    ns = namespace_of(pod)
    for c in constraints:
        key = c["topologyKey"]
        extra = {k: labels_of(pod)[k] for k in c.get("matchLabelKeys") or [] if k in labels_of(pod)}

        def selects(labels_: dict[str, str], c: Json = c, extra: dict[str, str] = extra) -> bool:
            return selector_matches(c.get("labelSelector"), labels_) and all(
                labels_.get(k) == v for k, v in extra.items()
            )

        # An empty selector (no requirements, none added from matchLabelKeys) counts no pod.
        raw_selector = c.get("labelSelector")
        empty = (
            raw_selector is not None
            and not extra
            and not (raw_selector.get("matchLabels") or raw_selector.get("matchExpressions"))
        )

        eligible = []
        for other_node in cluster.nodes.values():
            if any(k not in labels_of(other_node) for k in keys):
                continue
            if (c.get("nodeAffinityPolicy") or "Honor") == "Honor" and not node_affinity_ok(pod, other_node):
                continue
            if (c.get("nodeTaintsPolicy") or "Ignore") == "Honor" and any(
                not tolerated(pod, t) for t in hard_taints(other_node)
            ):
                continue
            eligible.append(other_node)
        counts: dict[str, int] = {}
        for other_node in eligible:
            value = labels_of(other_node)[key]
            n = sum(
                1
                for p in cluster.pods_on(name_of(other_node))
                if not empty
                and namespace_of(p) == ns
                and "deletionTimestamp" not in p["metadata"]
                and selects(labels_of(p))
            )
            counts[value] = counts.get(value, 0) + n
        min_domains = c.get("minDomains") or 1
        minimum = (min(counts.values()) if counts else 2**31 - 1) if len(counts) >= min_domains else 0
        self_match = 1 if selects(labels_of(pod)) else 0
        if counts.get(labels[key], 0) + self_match - minimum > c["maxSkew"]:
            return (False, "node(s) didn't match pod topology spread constraints", False)
    return OK


def _volume_conflict(a: Json, b: Json) -> bool:
    if "gcePersistentDisk" in a and "gcePersistentDisk" in b:
        x, y = a["gcePersistentDisk"], b["gcePersistentDisk"]
        if x["pdName"] == y["pdName"] and not (x.get("readOnly") and y.get("readOnly")):
            return True
    if (
        "awsElasticBlockStore" in a
        and "awsElasticBlockStore" in b
        and a["awsElasticBlockStore"]["volumeID"] == b["awsElasticBlockStore"]["volumeID"]
    ):
        return True
    if "iscsi" in a and "iscsi" in b:
        x, y = a["iscsi"], b["iscsi"]
        if x["iqn"] == y["iqn"] and not (x.get("readOnly") and y.get("readOnly")):
            return True
    if "rbd" in a and "rbd" in b:
        x, y = a["rbd"], b["rbd"]
        if (
            set(x["monitors"]) & set(y["monitors"])
            and x.get("pool", "rbd") == y.get("pool", "rbd")
            and x["image"] == y["image"]
            and not (x.get("readOnly") and y.get("readOnly"))
        ):
            return True
    return False


def no_disk_conflict(pod: Json, node: Json, cluster: Cluster) -> Result:
    mine = (pod.get("spec") or {}).get("volumes") or []
    for other in cluster.pods_on(name_of(node)):
        for theirs in (other.get("spec") or {}).get("volumes") or []:
            if any(_volume_conflict(v, theirs) for v in mine):
                return (False, "node(s) had no available disk", False)
    return OK


PREDICATES: dict[str, Any] = {
    "CheckNodeCondition": check_node_condition,
    "CheckNodeUnschedulable": check_node_unschedulable,
    "PodFitsHost": pod_fits_host,
    "MatchNodeSelector": match_node_selector,
    "PodToleratesNodeTaints": pod_tolerates_node_taints,
    "CheckNodeMemoryPressure": _pressure(
        "MemoryPressure", "node.kubernetes.io/memory-pressure", "node(s) had memory pressure", True
    ),
    "CheckNodeDiskPressure": _pressure("DiskPressure", "node.kubernetes.io/disk-pressure", "node(s) had disk pressure"),
    "CheckNodePIDPressure": _pressure("PIDPressure", "node.kubernetes.io/pid-pressure", "node(s) had pid pressure"),
    "PodFitsResources": pod_fits_resources,
    "PodFitsHostPorts": pod_fits_host_ports,
    "NoDiskConflict": no_disk_conflict,
    "PodTopologySpread": pod_topology_spread,
    "MatchInterPodAffinity": match_inter_pod_affinity,
}


def evaluate(pod: Json, node_name: str, nodes: list[Json], pods: list[Json], names: list[str]) -> dict[str, Result]:
    """Every named predicate's result for ``pod`` on ``node_name``."""
    cluster = Cluster(nodes, pods)
    node = cluster.nodes.get(node_name)
    if node is None:
        return {name: (False, NOT_FOUND, True) for name in names}
    return {name: PREDICATES[name](pod, node, cluster) for name in names}
