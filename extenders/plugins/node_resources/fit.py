"""PodFitsResources: kube-scheduler's NodeResourcesFit filter.

Every requested resource is checked, extended ones included, even those kube-scheduler is
told to ignore (managedResources with ignoredByScheduler): this extender is then the only
one counting them. A resource the node does not offer at all has an allocatable of zero.
Like today's plugin (and unlike the classic predicate), a shortfall is unresolvable when
the request exceeds the node's whole allocatable, since evicting pods cannot help then;
"Too many pods" and ordinary shortfalls stay resolvable by preemption.
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, NodeFamily, Verdict
from extenders.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from extenders.snapshot import Snapshot

TOO_MANY_PODS = "Too many pods"

# (resource name, amount requested, failure reason)
Request = tuple[str, int, str]


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


class ResourcesFitFilter:
    node_families = (NodeFamily.RESOURCES,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> tuple[Request, ...]:
        requests = pod.requests
        out: list[Request] = []
        for resource in (CPU, MEMORY, EPHEMERAL_STORAGE):
            amount = requests.get(resource, 0)
            if amount > 0:
                out.append((resource, amount, insufficient(resource)))
        for resource in sorted(requests):
            if resource in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS):
                continue
            amount = requests[resource]
            if amount > 0:
                out.append((resource, amount, insufficient(resource)))
        return tuple(out)

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        allocatable = node.allocatable
        reasons: list[str] | None = None
        unresolvable = False
        if len(node.pods) + 1 > allocatable.get(PODS, 0):
            reasons = [TOO_MANY_PODS]
        if state:
            requested = node.requested
            for resource, amount, reason in state:
                capacity = allocatable.get(resource, 0)
                if amount > capacity - requested.get(resource, 0):
                    if reasons is None:
                        reasons = []
                    reasons.append(reason)
                    if amount > capacity:
                        unresolvable = True
        if reasons is None:
            return FIT
        return Verdict(False, ", ".join(reasons), unresolvable)
