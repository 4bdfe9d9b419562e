"""Helpers for the gang scripts' store tests: members of a gang, a ``GangStore`` with short timings, and
an arrival with the defaults those tests share."""

from __future__ import annotations

from extenders.gang.config import GangConfig
from extenders.gang.state import ArriveResult, GangStore
from extenders.model import PodInfo
from extenders.sync.convert import pod_info
from extenders.sync.store import Store
from tests.gang_support import member


def pods(gang: str, n: int, minimum: int) -> list[PodInfo]:
    return [pod_info(member(f"{gang}-{i}", gang, minimum)) for i in range(n)]


def gangs(store: Store, **overrides: float) -> GangStore:
    settings: dict[str, float] = {"window_seconds": 5.0, "cooldown_seconds": 5.0, "arrival_lease_seconds": 5.0}
    settings.update(overrides)
    return GangStore(store.redis, store.prefix, GangConfig(poll_interval_seconds=0.05, **settings))  # type: ignore[arg-type]


async def arrive(
    g: GangStore,
    pod: PodInfo,
    node: str,
    minimum: int,
    *,
    token: str = "t",
    expected: int | None = None,
    bound: list[str] | None = None,
    score: int = 1000,
    window: float = 5.0,
    priority: int = 0,
) -> ArriveResult:
    gang = f"default/{pod.labels['scheduling.x-k8s.io/pod-group']}"
    return await g.arrive(
        gang,
        pod,
        node,
        expected,
        token=token,
        replica="r1",
        window_seconds=window,
        minimum=minimum,
        score=score,
        priority=priority,
        placed_uids=bound or [],
    )
