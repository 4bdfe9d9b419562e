"""What the gang churn stream knows of the cluster: its gangs (size, minimum, label scheme, priority and
the moments of their life), one reading of the pods and nodes, the figures it reports, and the bounds
its invariants allow (tests/e2e/churn.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEGACY = ("pod-group.scheduling.sigs.k8s.io/name", "pod-group.scheduling.sigs.k8s.io/min-available")
UNICORE = ("gang.unicore.mcyou.cn/name", "gang.unicore.mcyou.cn/available-count")
POD_GROUP = "scheduling.x-k8s.io/pod-group"
POD_GROUP_MIN = "scheduling.x-k8s.io/min-available"
SCHEMES = ("legacy", "unicore", "podgroup", "annotated")
# (PriorityClass, value): the end-to-end tier creates both classes; None is the default, 0.
PRIORITIES = ((None, 0), ("e2e-low", 100), ("e2e-high", 1000))
GANG_LABEL = "churn-gang"  # every member carries its gang's name here too (for deleting it)
PLAIN_LABEL = "churn-plain"

NODE_MILLICPU = 4000
MEMBER_MILLICPU = (500, 1000, 1500, 2000, 3000)
COMPLETE_SECONDS = 20.0
VACANT_SECONDS = 2.5
# A permitted gang's Bindings land one by one: the API shows it partly bound for that long.
RELEASE_SECONDS = 3.0


def millicpu(pod: dict[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu", "0")
        total += int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return total


@dataclass
class Gang:
    name: str
    size: int
    minimum: int
    millicpu: int
    scheme: str
    priority_class: str | None = None
    priority: int = 0
    names: list[str] = field(default_factory=list)
    created: float = 0.0
    cancelled: bool = False  # the test deletes it (cancelled, finished or drained)
    completed: float | None = None
    eligible_since: float | None = None
    partial_since: float | None = None

    def labels(self) -> dict[str, str]:
        base = {GANG_LABEL: self.name}
        if self.scheme == "legacy":
            return {**base, LEGACY[0]: self.name, LEGACY[1]: str(self.minimum)}
        if self.scheme == "unicore":
            return {**base, UNICORE[0]: self.name, UNICORE[1]: str(self.minimum)}
        return {**base, POD_GROUP: self.name}


@dataclass
class Observation:
    """One reading of the cluster: where every pod of the namespace is, which nodes exist."""

    pods: dict[str, dict[str, Any]]
    nodes: dict[str, int]  # node -> millicpu
    at: float

    def bound(self, names: list[str]) -> int:
        return sum(1 for n in names if n in self.pods and self.pods[n]["spec"].get("nodeName"))

    def free(self) -> dict[str, int]:
        used: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for pod in self.pods.values():
            node = pod["spec"].get("nodeName")
            if node in used:
                used[node] += millicpu(pod)
        return {node: self.nodes[node] - used[node] for node in self.nodes}


def names_of(values: Any) -> list[str]:
    """Redis replies (bytes or str) as text."""
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def fits(gang: Gang, need: int, free: dict[str, int]) -> bool:
    """Whether ``need`` more members of ``gang`` fit in ``free`` (members are all one size)."""
    return need <= 0 or sum(left // gang.millicpu for left in free.values() if left > 0) >= need


@dataclass
class Figures:
    gangs: int = 0
    completed: int = 0
    cancelled: int = 0
    finished: int = 0
    preempted: int = 0  # gangs whose every pod was evicted by a preemption
    plain: int = 0
    drained: int = 0
    restored: int = 0
    checks: int = 0
    waits: list[float] = field(default_factory=list)  # eligible -> complete, per gang
    slowest: tuple[str, float] = ("", 0.0)  # the gang that waited longest, and how long
