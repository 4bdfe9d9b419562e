"""Helpers shared by the gang and bind tests: objects, seeding the store, an in-process runtime."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from extenders.kube.client import KubeClient
from extenders.kube.events import EventRecorder
from extenders.model import PodInfo
from extenders.snapshot import Snapshot
from extenders.sync.cache import SnapshotCache
from extenders.sync.convert import node_facts, pod_info
from extenders.sync.store import Op, Store
from extenders.telemetry import Telemetry
from tests.fake_kube.builders import make_node, make_pod

GPU = "example.com/gpu"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_MIN = "scheduling.x-k8s.io/min-available"


def gpu_node(name: str, gpus: int = 8, cpu: str = "64", pods: str = "110") -> dict[str, Any]:
    return make_node(name, cpu=cpu, memory="256Gi", pods=pods, extra_allocatable={GPU: str(gpus)})


def member(
    name: str,
    gang: str | None,
    minimum: int | None = None,
    namespace: str = "default",
    gpus: int = 1,
    uid: str | None = None,
    created: str = "2024-01-01T00:00:00Z",
) -> dict[str, Any]:
    labels = {GANG_LABEL: gang} if gang else {}
    annotations = {GANG_MIN: str(minimum)} if minimum is not None else None
    extra = {GPU: str(gpus)} if gpus else None
    pod = make_pod(name, namespace=namespace, labels=labels, annotations=annotations, extra_requests=extra)
    pod["metadata"]["uid"] = uid or str(uuid.uuid4())
    pod["metadata"]["creationTimestamp"] = created
    return pod


async def seed(store: Store, nodes: Sequence[dict[str, Any]] = (), pods: Sequence[dict[str, Any]] = ()) -> int:
    """Write nodes and pods into the snapshot as a watcher would (takes the leader lease)."""
    attempt = await store.acquire_lease("test-seeder", 600)
    epoch = attempt.lease.epoch if attempt.lease else await store.epoch()
    ops = [Op.node(node_facts(n)) for n in nodes] + [Op.pod(pod_info(p)) for p in pods]
    return await store.apply(epoch, ops)


async def apply(store: Store, ops: Sequence[Op]) -> int:
    """Further watcher writes (deletes, binds seen) after ``seed``."""
    attempt = await store.acquire_lease("test-seeder", 600)
    epoch = attempt.lease.epoch if attempt.lease else await store.epoch()
    return await store.apply(epoch, list(ops))


def bound_copy(pod: dict[str, Any], node: str) -> PodInfo:
    """The pod as the watch sees it once bound to ``node``."""
    info = pod_info(pod)
    info.node_name = node
    info.phase = "Running"
    return info


class LocalRuntime:
    """The parts of ClusterRuntime bind needs, over a real Redis (and optionally a real API)."""

    def __init__(self, store: Store, kube: KubeClient | None = None, replica_id: str = "r1") -> None:
        self.store = store
        self.telemetry = Telemetry()
        self.cache = SnapshotCache(store, telemetry=self.telemetry)
        self.kube = kube
        self.replica_id = replica_id
        self.events = EventRecorder(kube, self.telemetry, instance=replica_id)  # its writer is not started

    async def snapshot(self) -> Snapshot:
        return await self.cache.refresh()

    def held_snapshot(self, max_age: float) -> Snapshot | None:
        return self.cache.held(max_age)


class RecordingKube:
    """A stand-in KubeClient for in-process tests of the coordinator: binds succeed, are recorded."""

    def __init__(self, pods: dict[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.pods = pods or {}
        self.bound: dict[str, str] = {}  # namespace/name -> node
        self.calls = 0
        self.requeued: list[str] = []  # namespace/name of every pod the nudger touched, in order
        self.preempted: list[str] = []  # namespace/name of every pod evicted so that its gang went whole

    def add(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.pods[(meta.get("namespace", "default"), meta["name"])] = pod

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get((namespace, name))

    async def annotate_pod(self, namespace: str, name: str, uid: str, annotations: dict[str, str]) -> bool:
        pod = self.pods.get((namespace, name))
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        pod["metadata"].setdefault("annotations", {}).update(annotations)
        self.requeued.append(f"{namespace}/{name}")
        return True

    async def preempt_pod(self, namespace: str, name: str, uid: str, message: str) -> bool:
        pod = self.pods.pop((namespace, name), None)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        self.preempted.append(f"{namespace}/{name}")
        return True

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> Any:
        from extenders.kube.client import BindResult, BindStatus

        self.calls += 1
        pod = self.pods.get((namespace, name))
        if pod is None:
            return BindResult(BindStatus.NOT_FOUND, "not found")
        if uid and pod["metadata"]["uid"] != uid:
            return BindResult(BindStatus.UID_MISMATCH, "uid")
        current = pod["spec"].get("nodeName")
        if current:
            if current == node:
                return BindResult(BindStatus.ALREADY_BOUND, node=node)
            return BindResult(BindStatus.BOUND_ELSEWHERE, f"bound to {current}", current)
        pod["spec"]["nodeName"] = node
        self.bound[f"{namespace}/{name}"] = node
        return BindResult(BindStatus.BOUND, node=node)
