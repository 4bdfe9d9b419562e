"""Builders and raw-state readers shared by the store tests."""

from __future__ import annotations

from typing import Any

from extenders.model import NodeFacts, PodInfo
from extenders.sync.store import Store


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
