"""kube-scheduler's extender/v1 wire types, with the Go field names as JSON keys.

kube-scheduler marshals these structs without json tags, so every key is capitalised.
Kubernetes objects inside them (v1.Pod, v1.Node) are typed in app.kube_types for what
scheduling reads and keep every other field, so node objects are echoed back unchanged.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator

from app.kube_types import Node, Pod


def _once_each(names: list[str], where: str) -> None:
    """kube-scheduler names each candidate once; a repeated one is a broken caller, told so (422)."""
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        if name in seen:
            repeated.add(name)
        seen.add(name)
    if repeated:
        shown = ", ".join(repr(n[:80]) for n in sorted(repeated)[:5])
        raise ValueError(f"{where} names a node more than once: {shown}")


class _Wire(BaseModel):
    # Unknown fields are ignored so a newer kube-scheduler never breaks us.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class NodeList(BaseModel):
    """A v1.NodeList; each item is checked for what we read and echoed back as it came."""

    model_config = ConfigDict(extra="allow")
    items: list[Node] = Field(default_factory=list)


class ExtenderArgs(_Wire):
    """Body of filter and prioritize: the pod and the candidate nodes, in one of two forms."""

    Pod: Pod
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None

    @model_validator(mode="after")
    def _candidates_once(self) -> Self:
        if self.NodeNames is not None:
            _once_each(self.NodeNames, "NodeNames")
        if self.Nodes is not None:
            _once_each([item.metadata.name for item in self.Nodes.items], "Nodes.items")
        return self


class PodIdentityMeta(_Wire):
    uid: str = ""
    resourceVersion: str | None = None


class PodIdentity(_Wire):
    metadata: PodIdentityMeta = Field(default_factory=PodIdentityMeta)


class CycleCall(_Wire):
    """ExtenderArgs read for the pod's identity and the candidates only: enough to answer a prioritize
    from scores computed ahead for the same pod, without reading the pod again."""

    Pod: PodIdentity
    Nodes: dict[str, Any] | None = None
    NodeNames: list[str] | None = None


class FilterCall(_Wire):
    """ExtenderArgs with the pod left as JSON, for filter to read it through its shape
    (app.pod_shapes); a pod of a new shape is validated as ExtenderArgs."""

    Pod: dict[str, Any]
    Nodes: Any = None
    NodeNames: list[StrictStr] | None = None


class ExtenderFilterResult(_Wire):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = Field(default_factory=dict)
    Error: str = ""


class HostPriority(_Wire):
    Host: str
    Score: int


class MetaPod(_Wire):
    UID: str


class Victims(_Wire):
    """Victims on one node as whole pods (nodeCacheCapable: false)."""

    Pods: list[Pod] = Field(default_factory=list)
    NumPDBViolations: int = 0


class MetaVictims(_Wire):
    """Victims on one node as UIDs (nodeCacheCapable: true, and always in answers)."""

    Pods: list[MetaPod] = Field(default_factory=list)
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(_Wire):
    Pod: Pod
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderPreemptionResult(_Wire):
    NodeNameToMetaVictims: dict[str, MetaVictims] = Field(default_factory=dict)


class ExtenderBindingArgs(_Wire):
    PodName: str = Field(min_length=1)
    PodNamespace: str = Field(min_length=1)
    PodUID: str = Field(min_length=1)
    Node: str = Field(min_length=1)


class ExtenderBindingResult(_Wire):
    Error: str = ""


class ExplainArgs(_Wire):
    """Body of /v1/explain: a pod and, optionally, the nodes to explain (default: all)."""

    Pod: Pod
    NodeNames: list[str] | None = None

    @model_validator(mode="after")
    def _nodes_once(self) -> Self:
        if self.NodeNames is not None:
            _once_each(self.NodeNames, "NodeNames")
        return self
