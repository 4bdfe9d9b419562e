"""Builders for the preempt verb's unit tests: k8s-shaped nodes, pods and PDBs, a snapshot of them,
and the verb as the app calls it. UIDs are ``uid-<name>`` so expectations read as pod names; the
preemptor asks for ``example.com/gpu``, a resource kube-scheduler is told to ignore, so only this
extender counts it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from extenders.gang import gang_of_for
from extenders.model import NodeInfo, PodInfo
from extenders.policy import default_policy
from extenders.preemption import MetaVictims
from extenders.preemption import process_preemption as _process_preemption
from extenders.snapshot import Snapshot
from extenders.sync.convert import node_facts, pdb_info, pod_info

GPU = "example.com/gpu"
HOST = "kubernetes.io/hostname"
POLICY = default_policy()
Json = dict[str, Any]


def process_preemption(
    policy: Any, preemptor: PodInfo, candidates: dict[str, Any], snap: Snapshot, **kw: Any
) -> dict[str, MetaVictims]:
    """The verb as the app calls it: with the gang package's membership rules unless a test says otherwise."""
    kw.setdefault("gang_of", gang_of_for(snap))
    return _process_preemption(policy, preemptor, candidates, snap, **kw).nodes


def node(name: str, cpu: str = "4", gpu: int = 0, pods: str = "110") -> Json:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": pods}
    if gpu:
        alloc[GPU] = str(gpu)
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    on: str = "",
    prio: int = 0,
    cpu: str = "100m",
    gpu: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    start: str | None = None,
    deleting: bool = False,
    phase: str = "Running",
    ns: str = "default",
    policy: str | None = None,
) -> Json:
    requests: Json = {"cpu": cpu}
    if gpu:
        requests[GPU] = str(gpu)
    meta: Json = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Json = {"containers": [{"name": "c", "resources": {"requests": requests}}], "priority": prio}
    if on:
        spec["nodeName"] = on
    if policy:
        spec["preemptionPolicy"] = policy
    status: Json = {"phase": phase if on else "Pending"}
    if start:
        status["startTime"] = start
    return {"metadata": meta, "spec": spec, "status": status}


def pdb(name: str, match: dict[str, str] | None, allowed: int, ns: str = "default") -> Json:
    spec: Json = {"selector": {"matchLabels": match}} if match is not None else {}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec, "status": {"disruptionsAllowed": allowed}}


def snapshot(nodes: Sequence[Json], pods: Sequence[Json] = (), pdbs: Sequence[Json] = ()) -> Snapshot:
    infos = [pod_info(p) for p in pods]
    out = Snapshot(generation=1)
    for n in nodes:
        facts = node_facts(n)
        out.nodes[facts.name] = NodeInfo.build(facts.name, facts, [p for p in infos if p.node_name == facts.name])
    for p in infos:
        if not p.node_name:
            out.pending[p.uid] = p
    out.objects = {"pdbs": {info.key: info for info in map(pdb_info, pdbs)}}
    return out


def uids(*names: str) -> list[str]:
    return [f"uid-{n}" for n in names]


def names(result: dict[str, MetaVictims]) -> dict[str, tuple[list[str], int]]:
    return {n: ([u.removeprefix("uid-") for u in m.uids], m.num_pdb_violations) for n, m in result.items()}


PREEMPTOR = pod("high", prio=1000, cpu="1", gpu=1)


def gang_pod(
    name: str,
    on: str,
    gang: str,
    minimum: int,
    prio: int = 10,
    gpu: int = 1,
    labels_extra: dict[str, str] | None = None,
    **kw: Any,
) -> Json:
    return pod(
        name,
        on,
        prio=prio,
        gpu=gpu,
        labels={"scheduling.x-k8s.io/pod-group": gang, **(labels_extra or {})},
        annotations={"scheduling.x-k8s.io/min-available": str(minimum)},
        **kw,
    )


def with_disrupted(budget: Json, *pod_names: str) -> Json:
    budget["status"]["disruptedPods"] = dict.fromkeys(pod_names, "2026-01-01T00:00:00Z")
    return budget


def nominated(name: str, to: str, prio: int, **kw: Any) -> Json:
    """A pending pod a preemption nominated to node ``to``."""
    out = pod(name, prio=prio, **kw)
    out["status"]["nominatedNodeName"] = to
    return out


def with_affinity_to(app: str, incoming: Json) -> Json:
    """``incoming`` requiring a pod labelled app=``app`` on the same node."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}
    incoming["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return incoming


def with_spread(selector: Json, incoming: Json) -> Json:
    """``incoming`` spread by hostname (maxSkew 1, DoNotSchedule) over the pods ``selector`` picks."""
    constraint = {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
    incoming["spec"]["topologySpreadConstraints"] = [constraint]
    return incoming
