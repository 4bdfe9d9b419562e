"""A seeded cluster and pod stream for the fidelity test: every predicate kube-scheduler runs by
default gets nodes that pass and nodes that fail it, and every score plug-in nodes it tells apart.

Nodes carry zones, tiers, a numeric rank (for Gt/Lt), optional disks, taints of every effect, one
is cordoned, one reports Ready=False and one MemoryPressure=True without the lifecycle
controller's taints (kube-scheduler filters on taints, not conditions), one lacks the zone label,
one holds few pods, some offer an extended resource and most hold some of the stream's images.
Pods draw requests that fill nodes (and some no node can hold), init containers and sidecars
(restartable init containers, whose requests and host ports count), host ports (also on plain init
containers, which do not count), pod-level requests where the release has them (1.34 on),
selectors, required and preferred node affinity with every operator and matchFields, tolerations,
required pod (anti-)affinity on hostname and zone (with namespaces lists and namespace selectors),
topology spread with minDomains, matchLabelKeys, empty and missing selectors and both inclusion
policies, and images some nodes hold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
FOO = "example.com/foo"
APPS = ("web", "db", "cache", "batch")
TEAMS = ("red", "blue")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
PAUSE = "registry.k8s.io/pause:3.9"
# Images nodes may hold, with their sizes: ImageLocality scores between 23 MiB and 1000 MiB per image.
IMAGES = {
    "registry.example/app:1": 80 * 2**20,
    "registry.example/big:2": 700 * 2**20,
    "registry.example/tools:3": 300 * 2**20,
    "registry.example/tiny:4": 10 * 2**20,
}


@dataclass
class NodeSpec:
    name: str
    cpu: str
    memory: str
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    extended: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    conditions: dict[str, str] = field(default_factory=dict)  # condition type -> status, beside Ready=True
    images: list[dict[str, Any]] = field(default_factory=list)  # status.images


def gen_nodes(rng: random.Random, prefix: str, count: int = 16) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    for i in range(count):
        labels = {"tier": rng.choice(("gold", "silver", "bronze")), "rank": str(rng.randint(1, 9))}
        if i != 3:  # one node lacks the zone label: spread on zone cannot place pods there
            labels[ZONE] = ("a", "b", "c")[i % 3]
        if rng.random() < 0.5:
            labels["disk"] = rng.choice(("ssd", "hdd"))
        nodes.append(
            NodeSpec(
                name=f"{prefix}-n{i:02d}",
                cpu=rng.choice(("2", "4", "8")),
                memory=rng.choice(("4Gi", "8Gi", "16Gi")),
                labels=labels,
                extended={FOO: "2"} if i % 4 == 1 else {},
                images=[{"names": [name], "sizeBytes": size} for name, size in IMAGES.items() if rng.random() < 0.45],
            )
        )
    nodes[0].taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    nodes[1].taints = [{"key": "soft", "value": "yes", "effect": "PreferNoSchedule"}]
    nodes[2].taints = [{"key": "evict", "value": "now", "effect": "NoExecute"}]
    nodes[4].unschedulable = True
    nodes[5].conditions = {"Ready": "False"}
    nodes[6].conditions = {"MemoryPressure": "True"}
    nodes[7].pods = 3
    nodes[8].taints = [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "soft", "value": "no", "effect": "PreferNoSchedule"},
    ]
    return nodes


def _quantity(rng: random.Random, choices: tuple[str, ...]) -> str | None:
    value = rng.choice(choices)
    return value or None


def _requests(rng: random.Random, with_foo: bool) -> dict[str, Any]:
    requests: dict[str, str] = {}
    cpu = _quantity(rng, ("", "100m", "100m", "250m", "500m", "1", "1500m", "3"))
    memory = _quantity(rng, ("", "128Mi", "128Mi", "512Mi", "1Gi", "2Gi", "6Gi"))
    if rng.random() < 0.03:  # more than any node's allocatable
        cpu, memory = rng.choice((("12", memory), (cpu, "24Gi")))
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {}
    if with_foo:
        requests[FOO] = "1"
        resources["limits"] = {FOO: "1"}
    if requests:
        resources["requests"] = requests
    return resources


def _ports(rng: random.Random) -> list[dict[str, Any]]:
    port: dict[str, Any] = {
        "containerPort": 80,
        "hostPort": rng.choice((8080, 8081, 9090)),
        "protocol": rng.choice(("TCP", "TCP", "UDP")),
    }
    if rng.random() < 0.3:
        port["hostIP"] = "127.0.0.1"
    return [port]


def _expression(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(OPERATORS)
    if op in ("Gt", "Lt"):
        return {"key": "rank", "operator": op, "values": [str(rng.randint(1, 9))]}
    key = rng.choice((ZONE, "tier", "disk"))
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    values = {ZONE: ("a", "b", "c"), "tier": ("gold", "silver", "bronze"), "disk": ("ssd", "hdd")}[key]
    return {"key": key, "operator": op, "values": rng.sample(values, rng.randint(1, 2))}


def _node_affinity(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    terms: list[dict[str, Any]] = []
    for _ in range(rng.choice((1, 1, 2))):
        term: dict[str, Any] = {"matchExpressions": [_expression(rng) for _ in range(rng.randint(1, 2))]}
        if rng.random() < 0.15:
            op = rng.choice(("In", "NotIn"))  # the API allows exactly one value here
            term["matchFields"] = [{"key": "metadata.name", "operator": op, "values": [rng.choice(node_names)]}]
        terms.append(term)
    preferred = [{"weight": rng.randint(1, 100), "preference": {"matchExpressions": [_expression(rng)]}}]
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
        "preferredDuringSchedulingIgnoredDuringExecution": preferred,
    }


def _tolerations(rng: random.Random) -> list[dict[str, Any]]:
    choices: list[dict[str, Any]] = [
        {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists"},
        {"key": "evict", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "soft", "operator": "Equal", "value": "yes", "effect": "PreferNoSchedule"},
        {"operator": "Exists"},
    ]
    return rng.sample(choices, rng.randint(1, 2))


def _pod_term(rng: random.Random, namespaces: tuple[str, str]) -> dict[str, Any]:
    term: dict[str, Any] = {
        "topologyKey": rng.choice((HOSTNAME, ZONE)),
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
    }
    draw = rng.random()
    if draw < 0.15:
        term["namespaces"] = list(namespaces)
    elif draw < 0.3:
        term["namespaceSelector"] = {"matchLabels": {"fidelity": "other"}}
    elif draw < 0.35:
        term["namespaceSelector"] = {}
    if rng.random() < 0.05:
        term["labelSelector"] = {"matchExpressions": [{"key": "team", "operator": "In", "values": [rng.choice(TEAMS)]}]}
    return term


def _spread(rng: random.Random, app: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in rng.sample((ZONE, HOSTNAME), rng.randint(1, 2)):
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": key,
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": app}},
        }
        if rng.random() < 0.2:
            constraint["minDomains"] = rng.choice((3, 4))
            constraint["whenUnsatisfiable"] = "DoNotSchedule"
        if rng.random() < 0.2:
            constraint["nodeAffinityPolicy"] = "Ignore"
        if rng.random() < 0.2:
            constraint["nodeTaintsPolicy"] = "Honor"
        if rng.random() < 0.2:
            constraint["matchLabelKeys"] = ["team"]
        draw = rng.random()
        if draw < 0.08:
            constraint["labelSelector"] = {}  # every pod of the namespace
        elif draw < 0.16:
            del constraint["labelSelector"]  # no pod (the API refuses matchLabelKeys without a selector)
            constraint.pop("matchLabelKeys", None)
        out.append(constraint)
    return out


def _image(rng: random.Random) -> str:
    return rng.choice((PAUSE, PAUSE, *IMAGES))


def _pod_level(rng: random.Random, containers: list[dict[str, Any]]) -> dict[str, Any]:
    """Pod-level requests, at least the containers' sum as the API requires, of cpu and/or memory."""
    out: dict[str, str] = {}
    for resource, unit, extra in (("cpu", "m", (0, 250, 1000)), ("memory", "Mi", (0, 256, 2048))):
        if rng.random() < 0.7:
            total = 0
            for container in containers:
                text = ((container.get("resources") or {}).get("requests") or {}).get(resource)
                if text:
                    total += _to_unit(text, unit)
            out[resource] = f"{total + rng.choice(extra)}{unit}"
    return {"requests": out} if out else {}


def _to_unit(text: str, unit: str) -> int:
    """A quantity of the stream's forms ("250m", "3", "512Mi", "2Gi") in millicores or MiB."""
    if unit == "m":
        return int(text[:-1]) if text.endswith("m") else int(text) * 1000
    return int(text[:-2]) * (1024 if text.endswith("Gi") else 1)


def gen_pod(
    rng: random.Random,
    index: int,
    scheduler: str,
    namespaces: tuple[str, str],
    node_names: list[str],
    minor: int = 28,
) -> tuple[str, dict[str, Any]]:
    """(namespace, a v1.Pod body) for the ``index``-th pod of the stream, for release 1.``minor``."""
    namespace = namespaces[0] if rng.random() < 0.75 else namespaces[1]
    app = rng.choice(APPS)
    labels = {"app": app, "team": rng.choice(TEAMS)}
    container: dict[str, Any] = {"name": "main", "image": _image(rng)}
    resources = _requests(rng, with_foo=rng.random() < 0.12)
    if resources:
        container["resources"] = resources
    if rng.random() < 0.15:
        container["ports"] = _ports(rng)
    spec: dict[str, Any] = {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0, "containers": [container]}
    if rng.random() < 0.3:
        init: dict[str, Any] = {"name": "init", "image": _image(rng)}
        init_resources = _requests(rng, with_foo=False)
        if init_resources:
            init["resources"] = init_resources
        if rng.random() < 0.4:
            init["ports"] = _ports(rng)
        if rng.random() < 0.4:
            init["restartPolicy"] = "Always"  # a sidecar (1.28's API server drops the field: a plain init)
        spec["initContainers"] = [init]
    if minor >= 34 and rng.random() < 0.15:
        pod_level = _pod_level(rng, [*spec.get("initContainers", []), container])
        if pod_level:
            spec["resources"] = pod_level
    if rng.random() < 0.15:
        spec["nodeSelector"] = rng.choice(({"tier": "gold"}, {"disk": "ssd"}, {ZONE: "b", "tier": "silver"}))
    affinity: dict[str, Any] = {}
    if rng.random() < 0.25:
        affinity["nodeAffinity"] = _node_affinity(rng, node_names)
    if rng.random() < 0.12:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng, namespaces)]}
    if rng.random() < 0.18:
        term = _pod_term(rng, namespaces)
        if rng.random() < 0.6:
            term["labelSelector"] = {"matchLabels": {"app": app}}
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.3:
        spec["tolerations"] = _tolerations(rng)
    if rng.random() < 0.22:
        spec["topologySpreadConstraints"] = _spread(rng, app)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index:03d}", "labels": labels}, "spec": spec}
    return namespace, body
