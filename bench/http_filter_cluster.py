"""The cluster ``bench_http_filter`` schedules into: nodes, the pods on them, a ReplicaSet's pending
siblings, and their writing into Redis through the ``Store`` (the watcher's path)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aredis

from extenders.sync.convert import node_facts, pod_info
from extenders.sync.store import Op, Store

Json = dict[str, Any]
BATCH = 500
AFFINITY_SHARE = 0.05
HOSTNAME = "kubernetes.io/hostname"


@dataclass(slots=True, frozen=True)
class PodSpec:
    """What varies between the existing pods; enough to rebuild either variant."""

    name: str
    node: str
    namespace: str
    app: str
    tier: str
    cpu_m: int
    memory_mi: int
    anti_affinity: bool  # carries a required anti-affinity term in the affinity scenario


def node_object(rng: random.Random, i: int) -> Json:
    name = f"node-{i}"
    spec: Json = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]} if i % 50 == 0 else {}
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.UUID(int=i)),
            "resourceVersion": str(1000 + i),
            "labels": {
                HOSTNAME: name,
                "topology.kubernetes.io/zone": f"zone-{i % 5}",
                "disk": rng.choice(("ssd", "hdd")),
            },
        },
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": [{"names": [f"registry/app-{j}:1"], "sizeBytes": 100 * 2**20} for j in range(rng.randrange(10))],
        },
    }


def anti_affinity(app: str) -> Json:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def pod_object(spec: PodSpec, with_affinity: bool) -> Json:
    pod_spec: Json = {
        "nodeName": spec.node,
        "containers": [
            {
                "name": "main",
                "image": f"registry/{spec.app}:1",
                "resources": {"requests": {"cpu": f"{spec.cpu_m}m", "memory": f"{spec.memory_mi}Mi"}},
            }
        ],
    }
    if with_affinity and spec.anti_affinity:
        pod_spec["affinity"] = anti_affinity(spec.app)
    return {
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "uid": f"uid-{spec.name}",
            "labels": {"app": spec.app, "tier": spec.tier},
        },
        "spec": pod_spec,
        "status": {"phase": "Running"},
    }


def pod_specs(rng: random.Random, nodes: int, per_node: int) -> list[PodSpec]:
    out: list[PodSpec] = []
    for i in range(nodes):
        for k in range(per_node):
            out.append(
                PodSpec(
                    name=f"p-{i}-{k}",
                    node=f"node-{i}",
                    namespace=f"ns-{rng.randrange(10)}",
                    app=f"app-{rng.randrange(50)}",
                    tier=rng.choice(("web", "db")),
                    cpu_m=rng.choice((50, 100, 200)),
                    memory_mi=rng.choice((64, 128, 256)),
                    anti_affinity=rng.random() < AFFINITY_SHARE,
                )
            )
    return out


def incoming_pod(with_affinity: bool) -> Json:
    """The pod being scheduled: the same shape as bench_filter's ``incoming``."""
    spec: Json = {
        "containers": [
            {"name": "main", "image": "registry/app-7:1", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
        ],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "app-7"}},
            }
        ],
    }
    if with_affinity:
        spec["affinity"] = anti_affinity("app-7")
    return {
        "metadata": {
            "name": "incoming",
            "namespace": "ns-1",
            "uid": "uid-incoming",
            "resourceVersion": "2" if with_affinity else "1",  # every pod from the API has one
            "labels": {"app": "app-7"},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def sibling(pod: Json, index: int) -> Json:
    """``pod`` as the ``index``-th pod of its ReplicaSet: kube-scheduler never filters one pod twice in a
    row, it filters its siblings, each with its own identity and service-account token volume."""
    volume = f"kube-api-access-{index:05x}"
    meta = {
        **pod["metadata"],
        "name": f"{pod['metadata']['name']}-{index:05x}",
        "uid": f"{pod['metadata']['uid']}-{index}",
        "resourceVersion": str(1000 + index),
        "creationTimestamp": f"2026-11-28T10:{index // 60 % 60:02d}:{index % 60:02d}Z",
    }
    container = {
        **pod["spec"]["containers"][0],
        "volumeMounts": [
            {"name": volume, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        ],
    }
    token = {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
    spec = {
        **pod["spec"],
        "containers": [container],
        "volumes": [{"name": volume, "projected": {"sources": [token], "defaultMode": 420}}],
    }
    return {**pod, "metadata": meta, "spec": spec}


async def write_ops(store: Store, epoch: int, ops: list[Op]) -> int:
    generation = 0
    for start in range(0, len(ops), BATCH):
        generation = await store.apply(epoch, ops[start : start + BATCH])
    return generation


def scenario_pods(with_affinity: bool, count: int, distinct: bool = False) -> list[Json]:
    """The pods one scenario schedules, one per pair: siblings of ``incoming_pod``; with ``distinct``,
    each asks for another CPU request, so that no two pods share a class or a shape (a stream of
    pods of different workloads, which no cache can serve)."""
    base = incoming_pod(with_affinity)
    first = 100_000 if with_affinity else 0
    pods = [sibling(base, first + i) for i in range(count)]
    if distinct:
        for i, pod in enumerate(pods):
            container = pod["spec"]["containers"][0]
            requests = {**container["resources"]["requests"], "cpu": f"{400 + i}m"}
            pod["spec"]["containers"] = [{**container, "resources": {**container["resources"], "requests": requests}}]
    return pods


async def load_cluster(store: Store, epoch: int, nodes: list[Json], pods: list[PodSpec], pending: list[Json]) -> int:
    ops = [Op.node(node_facts(n)) for n in nodes]
    ops += [Op.pod(pod_info(pod_object(p, with_affinity=False))) for p in pods]
    # The pods being scheduled, pending: kube-scheduler schedules pods the watch has already seen.
    ops += [Op.pod(pod_info(p)) for p in pending]
    return await write_ops(store, epoch, ops)


async def add_affinity(store: Store, epoch: int, pods: list[PodSpec], pending: list[Json]) -> tuple[int, int]:
    """Rewrite the anti-affinity pods with their term and add the scenario's pending pods; returns
    (generation, pods changed)."""
    changed = [p for p in pods if p.anti_affinity]
    ops = [Op.pod(pod_info(pod_object(p, with_affinity=True))) for p in changed]
    ops += [Op.pod(pod_info(p)) for p in pending]
    return await write_ops(store, epoch, ops), len(changed)


async def delete_prefix(client: aredis.Redis, prefix: str) -> None:
    batch: list[Any] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=2000):
        batch.append(key)
        if len(batch) >= 1000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)
