"""Seeded random cluster states and pods, as raw Kubernetes JSON, for differential tests.

Values come from small pools so that selectors, taints, ports and topology domains collide
often enough to exercise both outcomes of every predicate. ``build_snapshot`` turns a
generated cluster into the engine's Snapshot through the engine's own conversion (``extenders.sync.convert``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pod_info

NAMESPACES = ("ns1", "ns2")
ZONES = ("z1", "z2", "z3")
APPS = ("a", "b", "c")
TIERS = ("web", "db")
TAINT_KEYS = ("dedicated", "gpu", "spot")
TAINT_VALUES = ("", "x", "y")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
GPU = "example.com/gpu"
MISSING_NODE = "ghost-node"  # pods are bound to it but the snapshot has no Node object
UNKNOWN_NODE = "unknown-node"  # neither pods nor a Node object


@dataclass
class Cluster:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)  # bound pods (spec.nodeName set)

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def _labels(rng: random.Random) -> dict[str, str]:
    labels: dict[str, str] = {}
    if _maybe(rng, 0.8):
        labels["app"] = rng.choice(APPS)
    if _maybe(rng, 0.5):
        labels["tier"] = rng.choice(TIERS)
    return labels


def gen_node(rng: random.Random, index: int) -> dict[str, Any]:
    name = f"node-{index}"
    labels = {"kubernetes.io/hostname": name}
    if _maybe(rng, 0.85):
        labels["topology.kubernetes.io/zone"] = rng.choice(ZONES)
    if _maybe(rng, 0.6):
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if _maybe(rng, 0.6):
        labels["cores"] = str(rng.choice((2, 4, 8, 16)))
    allocatable: dict[str, str] = {
        "cpu": rng.choice(("1", "2", "4", "1500m")),
        "memory": rng.choice(("1Gi", "2Gi", "4Gi")),
        "pods": str(rng.choice((2, 3, 5, 110))),
    }
    if _maybe(rng, 0.7):
        allocatable["ephemeral-storage"] = rng.choice(("1Gi", "10Gi"))
    if _maybe(rng, 0.4):
        allocatable[GPU] = str(rng.choice((0, 1, 2, 4)))
    if _maybe(rng, 0.2):
        allocatable["hugepages-2Mi"] = rng.choice(("0", "4Mi", "64Mi"))
    taints = [
        {"key": rng.choice(TAINT_KEYS), "value": rng.choice(TAINT_VALUES), "effect": rng.choice(EFFECTS)}
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2)))
    ]
    conditions: list[dict[str, str]] = []
    if _maybe(rng, 0.9):
        conditions.append({"type": "Ready", "status": rng.choice(("True",) * 8 + ("False", "Unknown"))})
    for kind in ("NetworkUnavailable", "MemoryPressure", "DiskPressure", "PIDPressure"):
        if _maybe(rng, 0.5):
            conditions.append({"type": kind, "status": rng.choice(("False",) * 8 + ("True",))})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if _maybe(rng, 0.08):
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": {"allocatable": allocatable, "conditions": conditions},
    }


def _requests(rng: random.Random, scale: float) -> dict[str, str]:
    out: dict[str, str] = {}
    if _maybe(rng, 0.8):
        out["cpu"] = f"{int(rng.choice((100, 250, 500, 1000, 2000)) * scale) or 1}m"
    if _maybe(rng, 0.8):
        out["memory"] = f"{int(rng.choice((64, 256, 512, 1024)) * scale) or 1}Mi"
    if _maybe(rng, 0.2):
        out["ephemeral-storage"] = rng.choice(("100Mi", "2Gi"))
    if _maybe(rng, 0.2):
        out[GPU] = str(rng.choice((1, 2)))
    if _maybe(rng, 0.05):
        out["hugepages-2Mi"] = "4Mi"
    return out


def _label_selector(rng: random.Random) -> dict[str, Any]:
    choice = rng.random()
    if choice < 0.5:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    if choice < 0.8:
        op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
        expr: dict[str, Any] = {"key": rng.choice(("app", "tier")), "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = rng.sample(APPS + TIERS, rng.choice((1, 2)))
        return {"matchExpressions": [expr]}
    if choice < 0.9:
        return {"matchLabels": {"app": rng.choice(APPS)}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    return {}


def _affinity_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": _label_selector(rng),
        "topologyKey": rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone", "disk")),
    }
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = rng.sample(NAMESPACES, rng.choice((1, 2)))
    elif roll < 0.25:
        term["namespaceSelector"] = {}
    elif roll < 0.32:
        term["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": rng.choice(NAMESPACES)}}
    elif roll < 0.36:
        term["namespaceSelector"] = {"matchLabels": {"team": "x"}}
    return term


def _node_requirement(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.2:
        return {"key": "cores", "operator": rng.choice(("Gt", "Lt")), "values": [str(rng.choice((2, 4, 8)))]}
    key = rng.choice(("disk", "topology.kubernetes.io/zone"))
    op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
    req: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        pool = ("ssd", "hdd") if key == "disk" else ZONES
        req["values"] = rng.sample(pool, rng.choice((1, 2)))
    return req


def _node_affinity(rng: random.Random, node_count: int) -> dict[str, Any]:
    terms: list[dict[str, Any]] = []
    for _ in range(rng.choice((0, 1, 1, 2))):
        term: dict[str, Any] = {}
        if _maybe(rng, 0.9):
            term["matchExpressions"] = [_node_requirement(rng) for _ in range(rng.choice((1, 2)))]
        if _maybe(rng, 0.15):
            term["matchFields"] = [
                {
                    "key": "metadata.name",
                    "operator": rng.choice(("In", "NotIn")),
                    "values": [f"node-{rng.randrange(node_count)}"],
                }
            ]
        terms.append(term)
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def _tolerations(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(rng.choice((0, 0, 1, 2))):
        roll = rng.random()
        if roll < 0.1:
            out.append({"operator": "Exists"})
        elif roll < 0.2:
            out.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"})
        elif roll < 0.25:
            out.append({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"})
        else:
            tol: dict[str, Any] = {"key": rng.choice(TAINT_KEYS)}
            if _maybe(rng, 0.5):
                tol["operator"] = "Exists"
            else:
                tol["operator"] = rng.choice(("Equal", None)) or "Equal"
                tol["value"] = rng.choice(TAINT_VALUES)
            if _maybe(rng, 0.6):
                tol["effect"] = rng.choice(EFFECTS)
            out.append(tol)
    return out


def _spread(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(rng.choice((1, 1, 2))):
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": rng.choice(("topology.kubernetes.io/zone", "kubernetes.io/hostname", "disk")),
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": _label_selector(rng),
        }
        if _maybe(rng, 0.2):
            constraint["minDomains"] = rng.choice((2, 3, 4))
        if _maybe(rng, 0.2):
            constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if _maybe(rng, 0.2):
            constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        if _maybe(rng, 0.15):
            constraint["matchLabelKeys"] = ["tier"]
        out.append(constraint)
    return out


def _volumes(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(rng.choice((0, 0, 0, 1, 2))):
        kind = rng.choice(("gce", "ebs", "rbd", "iscsi"))
        ro = _maybe(rng, 0.4)
        if kind == "gce":
            src: dict[str, Any] = {"gcePersistentDisk": {"pdName": rng.choice(("pd1", "pd2")), "readOnly": ro}}
        elif kind == "ebs":
            src = {"awsElasticBlockStore": {"volumeID": rng.choice(("vol1", "vol2")), "readOnly": ro}}
        elif kind == "rbd":
            src = {
                "rbd": {
                    "monitors": rng.sample(("m1", "m2", "m3"), rng.choice((1, 2))),
                    "pool": rng.choice(("rbd", "p2")),
                    "image": rng.choice(("img1", "img2")),
                    "readOnly": ro,
                }
            }
        else:
            src = {
                "iscsi": {
                    "targetPortal": "10.0.0.1:3260",
                    "iqn": rng.choice(("iqn1", "iqn2")),
                    "lun": 0,
                    "readOnly": ro,
                }
            }
        out.append({"name": f"v{i}", **src})
    return out


def _ports(rng: random.Random) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = []
    for _ in range(rng.choice((0, 0, 0, 1, 2))):
        port: dict[str, Any] = {"containerPort": 80, "hostPort": rng.choice((80, 443, 8080))}
        if _maybe(rng, 0.3):
            port["protocol"] = rng.choice(("TCP", "UDP"))
        if _maybe(rng, 0.4):
            port["hostIP"] = rng.choice(("0.0.0.0", "10.0.0.1", "10.0.0.2"))
        ports.append(port)
    return ports


def gen_pod(
    rng: random.Random,
    name: str,
    node_count: int,
    node_name: str = "",
    *,
    incoming: bool = False,
) -> dict[str, Any]:
    """A pod; ``incoming`` pods get the full range of constraints, bound ones a lighter mix."""
    richness = 1.0 if incoming else 0.3
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": _requests(rng, 1.0 if incoming else 0.5)},
                "ports": _ports(rng) if _maybe(rng, richness + 0.2) else [],
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    affinity: dict[str, Any] = {}
    if incoming and _maybe(rng, 0.3):
        spec["nodeSelector"] = {"disk": rng.choice(("ssd", "hdd"))}
    if incoming and _maybe(rng, 0.35):
        affinity["nodeAffinity"] = _node_affinity(rng, node_count)
    if _maybe(rng, 0.3 * richness):
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_affinity_term(rng) for _ in range(rng.choice((1, 2)))]
        }
    if _maybe(rng, 0.35 * richness + 0.1):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_affinity_term(rng) for _ in range(rng.choice((1, 2)))]
        }
    if affinity:
        spec["affinity"] = affinity
    tolerations = _tolerations(rng) if incoming else []
    if tolerations:
        spec["tolerations"] = tolerations
    if incoming and _maybe(rng, 0.35):
        spec["topologySpreadConstraints"] = _spread(rng)
    volumes = _volumes(rng)
    if volumes:
        spec["volumes"] = volumes
    if incoming and _maybe(rng, 0.05):
        spec["nodeName"] = f"node-{rng.randrange(node_count)}"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": rng.choice(NAMESPACES),
        "uid": f"uid-{name}",
        "labels": _labels(rng),
    }
    if not incoming and _maybe(rng, 0.05):
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def gen_cluster(rng: random.Random, node_count: int | None = None) -> Cluster:
    count = node_count if node_count is not None else rng.randint(3, 10)
    cluster = Cluster(nodes=[gen_node(rng, i) for i in range(count)])
    targets = [*cluster.node_names(), MISSING_NODE]
    for i in range(rng.randint(0, count * 3)):
        cluster.pods.append(gen_pod(rng, f"pod-{i}", count, node_name=rng.choice(targets)))
    return cluster


def gen_incoming_pod(rng: random.Random, cluster: Cluster) -> dict[str, Any]:
    return gen_pod(rng, "incoming", len(cluster.nodes), incoming=True)


def candidate_names(rng: random.Random, cluster: Cluster) -> list[str]:
    """The names a filter call would carry: the cluster's nodes plus, sometimes, unknown ones."""
    names = cluster.node_names()
    if _maybe(rng, 0.3):
        names.append(MISSING_NODE)
    if _maybe(rng, 0.3):
        names.append(UNKNOWN_NODE)
    return names


def build_snapshot(cluster: Cluster) -> Snapshot:
    facts = {n["metadata"]["name"]: node_facts(n) for n in cluster.nodes}
    by_node: dict[str, list[PodInfo]] = {}
    for raw in cluster.pods:
        info = pod_info(raw)
        by_node.setdefault(info.node_name, []).append(info)
    names = set(facts) | set(by_node)
    nodes = {name: NodeInfo.build(name, facts.get(name), by_node.get(name, [])) for name in names}
    return Snapshot(nodes=nodes)
