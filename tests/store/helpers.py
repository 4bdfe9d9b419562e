"""Builders and raw-state readers shared by the store tests."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeFacts, PDBInfo, PodGroupInfo, PodInfo
from extenders.sync.kinds import PDBS, PODGROUPS
from extenders.sync.store import Op, Store


def node(name: str, rv: str = "1", cpu: int = 4000, **kw: Any) -> NodeFacts:
    return NodeFacts(name=name, resource_version=rv, allocatable={"cpu": cpu, "memory": 8 << 30, "pods": 110}, **kw)


def pod(uid: str, node_name: str = "", cpu: int = 100, **kw: Any) -> PodInfo:
    kw.setdefault("phase", "Running" if node_name else "Pending")
    return PodInfo(
        namespace="default",
        name=f"pod-{uid}",
        uid=uid,
        node_name=node_name,
        requests={"cpu": cpu, "memory": 1 << 20},
        nonzero_cpu=cpu,
        nonzero_memory=1 << 20,
        **kw,
    )


async def dump(store: Store) -> dict[str, Any]:
    """Every key under the store's prefix with its full value, for nothing-changed assertions."""
    r = store.redis
    out: dict[str, Any] = {}
    async for key in r.scan_iter(match=f"{store.prefix}:*"):
        raw_kind = await r.type(key)
        kind = raw_kind.decode() if isinstance(raw_kind, bytes) else raw_kind
        if kind == "string":
            out[key.decode()] = await r.get(key)
        elif kind == "hash":
            out[key.decode()] = await r.hgetall(key)
        elif kind == "zset":
            out[key.decode()] = await r.zrange(key, 0, -1, withscores=True)
    return out


async def pods_on(store: Store, name: str) -> dict[str, PodInfo]:
    return (await store.read_node(name))[1]


async def pending(store: Store) -> set[str]:
    return await store.hash_keys("pending")


async def seed(store: Store, epoch: int, nodes: int = 20, pods_per_node: int = 3) -> None:
    """``nodes`` nodes ``n0``.. with ``pods_per_node`` pods each, a pending pod, a PDB and a pod group."""
    ops = [Op.node(node(f"n{i}")) for i in range(nodes)]
    ops += [Op.pod(pod(f"u{i}-{j}", f"n{i}")) for i in range(nodes) for j in range(pods_per_node)]
    ops += [Op.pod(pod("pending-1")), PDBS.upsert(PDBInfo("default", "b1", {}, 1))]
    ops.append(PODGROUPS.upsert(PodGroupInfo("default", "g1", 2)))
    await store.apply(epoch, ops)
