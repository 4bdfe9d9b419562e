"""How the reference scheduler reads raw v1.Pod and v1.Node JSON: labels, selectors, node affinity,
taints, requests, host ports, conditions. Plain on purpose, sharing nothing with the engine
(see ``tests.reference_scheduler``)."""

from __future__ import annotations

from typing import Any

from extenders.quantity import resource_amount

Json = dict[str, Any]


def labels_of(obj: Json) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def name_of(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(pod: Json) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def selector_matches(selector: Json | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def node_requirement_ok(req: Json, labels: dict[str, str]) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return selector_matches({"matchExpressions": [req]}, labels)


def node_term_ok(term: Json, node: Json) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(node_requirement_ok(e, labels_of(node)) for e in exprs):
        return False
    for f in fields:
        same = name_of(node) == f["values"][0]
        if (f["operator"] == "In") != same:
            return False
    return True


def node_affinity_ok(pod: Json, node: Json) -> bool:
    spec = pod.get("spec") or {}
    labels = labels_of(node)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return any(node_term_ok(t, node) for t in required.get("nodeSelectorTerms") or [])


def toleration_ok(tol: Json, taint: Json) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect", ""):
        return False
    if tol.get("key") and tol["key"] != taint.get("key", ""):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and (tol.get("value") or "") == (taint.get("value") or "")


def tolerated(pod: Json, taint: Json) -> bool:
    return any(toleration_ok(t, taint) for t in (pod.get("spec") or {}).get("tolerations") or [])


def hard_taints(node: Json) -> list[Json]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]


def _sum_requests(containers: list[Json], source: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in containers:
        for key, qty in (source(container) or {}).items():
            total[key] = total.get(key, 0) + resource_amount(key, qty)
    return total


def pod_requests(pod: Json) -> dict[str, int]:
    """Regular containers only (no init containers or overhead), resized in place and pod-level."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}

    def spec_of(c: Json) -> Any:
        return (c.get("resources") or {}).get("requests")

    def allocated_of(c: Json) -> Any:
        s = statuses.get(c.get("name"))
        return s["allocatedResources"] if s and "allocatedResources" in s else spec_of(c)

    def actual_of(c: Json) -> Any:
        s = statuses.get(c.get("name"))
        return ((s or {}).get("resources") or {}).get("requests") or allocated_of(c)

    # A pod being resized counts, per resource, the most of what it asks, was allocated and runs with.
    total: dict[str, int] = {}
    for source in (spec_of, allocated_of, actual_of):
        for key, amount in _sum_requests(containers, source).items():
            total[key] = max(total.get(key, 0), amount)
    # Pod-level requests replace the containers' total for cpu, memory and hugepages.
    for key, qty in ((spec.get("resources") or {}).get("requests") or {}).items():
        if key in ("cpu", "memory") or key.startswith("hugepages-"):
            total[key] = resource_amount(key, qty)
    return total


def host_ports(pod: Json) -> list[tuple[str, str, int]]:
    """Regular containers and sidecars (restartPolicy Always init containers) hold host ports."""
    out = []
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in [*(spec.get("containers") or []), *sidecars]:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                out.append((port.get("protocol") or "TCP", port.get("hostIP") or "0.0.0.0", int(port["hostPort"])))
    return out


def conditions(node: Json) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
