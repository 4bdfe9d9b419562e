"""The parts of core/v1 Pod and Node the engine reads, typed, so hostile shapes answer 422.

Every model allows (and keeps) fields it does not name: only what scheduling reads is
checked, with the types the Kubernetes API itself guarantees. A pod whose
``spec.containers`` is a string, or whose selector values are numbers, is refused here
with the path of the bad field, instead of failing deep inside a predicate.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    model_validator,
)
from pydantic.functional_validators import ModelWrapValidatorHandler

# A resource.Quantity as JSON: normally a string ("250m"), numbers are accepted too. Its amount is
# read (and a negative one refused) once, where the pod becomes a PodInfo (extenders.quantity).
Quantity = StrictStr | StrictInt | StrictFloat
ResourceList = dict[str, Quantity]
Str = StrictStr
# Kubernetes integers are int32 unless said otherwise; bounding them keeps the engine's arithmetic sane.
Int = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)]
StrList = list[StrictStr]


class _Obj(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Sourced(_Obj):
    """An object whose JSON is read further as it came (converted by extenders.sync.convert, echoed
    back): parsed from a request, it keeps the very mapping it was validated from, so nothing dumps it
    again. Worth it for node objects (converted and echoed, many a request); a pod is dumped when it is
    converted instead, as keeping its mapping would cost the calls that never convert it (a prioritize
    answered from its filter's cycle)."""

    _source: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_source(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        model = handler(data)
        if info.mode == "json" and isinstance(data, dict):  # a plain JSON mapping, nothing else in it
            model._source = data
        return model

    def as_json(self) -> dict[str, Any]:
        """The object as Kubernetes JSON, as it was sent."""
        return self._source if self._source is not None else self.model_dump(exclude_unset=True, exclude_none=True)


class ResourceRequirements(_Obj):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ContainerPort(_Obj):
    containerPort: Int | None = None
    hostPort: Annotated[int, Field(strict=True, ge=0, le=65535)] | None = None
    protocol: Str | None = None
    hostIP: Str | None = None


class Container(_Obj):
    name: Str = ""
    image: Str | None = None
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] | None = None
    restartPolicy: Str | None = None


def _check_values(operator: str, values: list[str] | None) -> None:
    """The API server's rule for a requirement's values; a pod breaking it was never admitted, so it
    is refused here (422) rather than evaluated as "matches nothing"."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"operator {operator} takes no values")
    # The API server checks only the count: a value that is not an integer matches no node.
    if operator in ("Gt", "Lt") and len(values or []) != 1:
        raise ValueError(f"operator {operator} takes exactly one value")


class LabelSelectorRequirement(_Obj):
    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: StrList | None = None

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> Self:
        _check_values(self.operator, self.values)
        return self


class LabelSelector(_Obj):
    matchLabels: dict[str, StrictStr] | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class NodeSelectorRequirement(_Obj):
    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: StrList | None = None

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> Self:
        _check_values(self.operator, self.values)
        return self


class NodeFieldSelectorRequirement(_Obj):
    """A ``matchFields`` entry: only ``metadata.name``, with In or NotIn and exactly one value."""

    key: Literal["metadata.name"]
    operator: Literal["In", "NotIn"]
    values: Annotated[StrList, Field(min_length=1, max_length=1)]


class NodeSelectorTerm(_Obj):
    matchExpressions: list[NodeSelectorRequirement] | None = None
    matchFields: list[NodeFieldSelectorRequirement] | None = None


class NodeSelector(_Obj):
    nodeSelectorTerms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(_Obj):
    weight: Int = 0
    preference: NodeSelectorTerm = Field(default_factory=NodeSelectorTerm)


class NodeAffinity(_Obj):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None
    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(_Obj):
    labelSelector: LabelSelector | None = None
    namespaces: StrList | None = None
    namespaceSelector: LabelSelector | None = None
    topologyKey: Str = ""
    matchLabelKeys: StrList | None = None
    mismatchLabelKeys: StrList | None = None


class WeightedPodAffinityTerm(_Obj):
    weight: Int = 0
    podAffinityTerm: PodAffinityTerm = Field(default_factory=PodAffinityTerm)


class PodAffinity(_Obj):
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm] | None = None
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm] | None = None


class Affinity(_Obj):
    nodeAffinity: NodeAffinity | None = None
    podAffinity: PodAffinity | None = None
    podAntiAffinity: PodAffinity | None = None


class Toleration(_Obj):
    key: Str | None = None
    operator: Literal["Exists", "Equal", ""] | None = None
    value: Str | None = None
    effect: Str | None = None
    tolerationSeconds: Int64 | None = None

    @model_validator(mode="after")
    def _as_the_api_server_admits(self) -> Self:
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value")
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without a key needs operator Exists")
        return self


class TopologySpreadConstraint(_Obj):
    maxSkew: Int = 1
    topologyKey: Str = ""
    whenUnsatisfiable: Str = ""
    labelSelector: LabelSelector | None = None
    minDomains: Int | None = None
    nodeAffinityPolicy: Str | None = None
    nodeTaintsPolicy: Str | None = None
    matchLabelKeys: StrList | None = None


class _DiskSource(_Obj):
    readOnly: StrictBool | None = None


class GCEPersistentDisk(_DiskSource):
    pdName: Str = ""


class AWSElasticBlockStore(_DiskSource):
    volumeID: Str = ""


class RBDVolume(_DiskSource):
    monitors: StrList | None = None
    pool: Str | None = None
    image: Str = ""


class ISCSIVolume(_DiskSource):
    targetPortal: Str = ""
    iqn: Str = ""
    lun: Int = 0


class PVCVolume(_DiskSource):
    claimName: Str = ""


class ImageVolumeSource(_Obj):
    reference: Str | None = None
    pullPolicy: Str | None = None


class Volume(_Obj):
    name: Str = ""
    image: ImageVolumeSource | None = None
    gcePersistentDisk: GCEPersistentDisk | None = None
    awsElasticBlockStore: AWSElasticBlockStore | None = None
    rbd: RBDVolume | None = None
    iscsi: ISCSIVolume | None = None
    persistentVolumeClaim: PVCVolume | None = None


class PodSpec(_Obj):
    containers: list[Container] = Field(default_factory=list)
    initContainers: list[Container] | None = None
    overhead: ResourceList | None = None
    resources: ResourceRequirements | None = None
    nodeName: Str | None = None
    nodeSelector: dict[str, StrictStr] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    topologySpreadConstraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None
    priority: Int | None = None
    preemptionPolicy: Str | None = None
    schedulerName: Str | None = None


class OwnerReference(_Obj):
    apiVersion: Str = ""
    kind: Str = ""
    name: Str = ""
    uid: Str = ""
    controller: StrictBool | None = None


class ObjectMeta(_Obj):
    """The part of metav1.ObjectMeta we read; everything else is kept."""

    name: Str = ""
    namespace: Str = ""
    uid: Str = ""
    resourceVersion: Str | None = None
    labels: dict[str, StrictStr] | None = None
    annotations: dict[str, StrictStr] | None = None
    ownerReferences: list[OwnerReference] | None = None
    deletionTimestamp: Str | None = None
    creationTimestamp: Str | None = None


class ContainerStatus(_Obj):
    name: Str = ""
    allocatedResources: ResourceList | None = None
    resources: ResourceRequirements | None = None


class PodCondition(_Obj):
    type: Str = ""
    status: Str | None = None
    reason: Str | None = None


class PodStatus(_Obj):
    phase: Str | None = None
    startTime: Str | None = None
    conditions: list[PodCondition] | None = None
    containerStatuses: list[ContainerStatus] | None = None
    initContainerStatuses: list[ContainerStatus] | None = None
    # Pod-wide totals, with the overhead, that kubelets report while resizing pod-level resources.
    allocatedResources: ResourceList | None = None
    resources: ResourceRequirements | None = None


class Pod(_Obj):
    """A v1.Pod."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def as_json(self) -> dict[str, Any]:
        """The pod as Kubernetes JSON (the fields sent, explicit nulls left out)."""
        return self.model_dump(exclude_unset=True, exclude_none=True)


class Taint(_Obj):
    key: Str = ""
    value: Str | None = None
    effect: Str = ""


class NodeSpec(_Obj):
    taints: list[Taint] | None = None
    unschedulable: StrictBool | None = None


class NodeCondition(_Obj):
    type: Str = ""
    status: Str = ""


class ContainerImage(_Obj):
    names: StrList | None = None
    sizeBytes: Int64 | None = None


class NodeStatus(_Obj):
    allocatable: ResourceList | None = None
    capacity: ResourceList | None = None
    conditions: list[NodeCondition] | None = None
    images: list[ContainerImage] | None = None


class Node(_Sourced):
    """A v1.Node: validated for what we read; the request's own object is what gets echoed."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)
