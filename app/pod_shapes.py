"""Filter's pod read once per shape: the pods of one workload differ only in their identity.

Validating a wire pod and converting it to a ``PodInfo`` was most of what a warm filter cost, and
kube-scheduler sends the hundredth pod of a Deployment with the same spec as the first. A pod's
*shape* is its JSON without the fields that differ between such siblings: its identity (name, uid,
resourceVersion, creation time, labels, annotations; read from each pod, with the types validation
admits) and fields that neither validation nor conversion reads (the service-account token volume's
generated name and its mounts, the hostname, condition timestamps). A pod of a known shape gets that
shape's ``PodInfo`` with its own identity, exactly what the full path would have built; any other
body takes the full path, which also answers every malformed one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
from pydantic import ValidationError

from app import translate
from app.wire import ExtenderArgs, FilterCall
from extenders.model import PodInfo
from extenders.sync.convert import CONFLICT_VOLUME_KEYS


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _text_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _text_map_or_null(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(isinstance(v, str) for v in value.values()))


# Per-pod metadata, read from each pod into its PodInfo, with the types ObjectMeta admits. Labels and
# annotations differ between siblings too (a StatefulSet's or an indexed Job's pod index, the
# extender's own requeue stamp); the equivalence class is computed from each pod's own PodInfo.
_IDENTITY: dict[str, Callable[[Any], bool]] = {
    "name": _text,
    "uid": _text,
    "resourceVersion": _text_or_null,
    "creationTimestamp": _text_or_null,
    "labels": _text_map_or_null,
    "annotations": _text_map_or_null,
}
# Fields that neither validation (app.kube_types) nor conversion (extenders.sync.convert) reads.
_UNREAD_META = frozenset(("generateName", "managedFields", "selfLink"))
_UNREAD_SPEC = frozenset(("hostname",))  # a StatefulSet's or indexed Job's pod name
_UNREAD_CONTAINER = frozenset(("volumeMounts",))
_UNREAD_CONDITION = frozenset(("lastTransitionTime", "lastProbeTime", "message"))
_CONTAINER_LISTS = ("containers", "initContainers")

DEFAULT_SHAPES = 256


@dataclass(frozen=True, slots=True)
class FilterInputs:
    """What filter needs of a names-form call: the pod, its resourceVersion and the candidates."""

    pod: PodInfo
    resource_version: str
    names: list[str]


def _without(item: Any, keys: frozenset[str]) -> Any:
    return {k: v for k, v in item.items() if k not in keys} if isinstance(item, dict) else item


def _volume(volume: Any) -> Any:
    """A volume without its name, unless conversion keeps the name (a volume that can conflict)."""
    if not isinstance(volume, dict) or not isinstance(volume.get("name"), str):
        return volume
    if any(k in volume for k in CONFLICT_VOLUME_KEYS):
        return volume
    return {k: v for k, v in volume.items() if k != "name"}


def shape_key(pod: dict[str, Any]) -> bytes | None:
    """The pod's shape as bytes, or None when its parts are not objects where a pod has objects (the
    full path says what is wrong). Only leaves out: a field is dropped when its value is of a type
    validation admits, so a pod that would fail validation never shares a valid pod's shape."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    if not (isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)):
        return None
    shape_meta = {k: v for k, v in meta.items() if k not in _UNREAD_META and not (k in _IDENTITY and _IDENTITY[k](v))}
    shape_spec = {k: v for k, v in spec.items() if k not in _UNREAD_SPEC}
    for field in _CONTAINER_LISTS:
        containers = spec.get(field)
        if isinstance(containers, list):
            shape_spec[field] = [_without(c, _UNREAD_CONTAINER) for c in containers]
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        shape_spec["volumes"] = [_volume(v) for v in volumes]
    shape_status = dict(status)
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        shape_status["conditions"] = [_without(c, _UNREAD_CONDITION) for c in conditions]
    try:
        return orjson.dumps({**pod, "metadata": shape_meta, "spec": shape_spec, "status": shape_status})
    except orjson.JSONEncodeError:  # an integer past 64 bits: the full path judges it
        return None


class PodShapesCollector(Collector):
    """``extender_filter_pod_reads_total{how}``: read at scrape time, so a call pays no metric."""

    def __init__(self, shapes: PodShapes) -> None:
        self.shapes = shapes

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "extender_filter_pod_reads",
            "Pods filter read, by how: shape (a shape met before, its identity read alone) or full "
            "(validated and converted).",
            labels=["how"],
        )
        family.add_metric(["shape"], self.shapes.reused)
        family.add_metric(["full"], self.shapes.read)
        yield family


class PodShapes:
    """The ``PodInfo`` of recent pod shapes. A shape met once waits in ``size`` places of its own and is
    kept (in ``size`` more) when met again: pods whose shape is theirs alone (each with a volume
    claim of its own, say) pass through without pushing out a workload's shape."""

    def __init__(self, size: int = DEFAULT_SHAPES) -> None:
        self.size = size
        self.reused = 0
        self.read = 0
        self._new: OrderedDict[bytes, PodInfo] = OrderedDict()
        self._kept: OrderedDict[bytes, PodInfo] = OrderedDict()

    def filter_inputs(self, body: bytes) -> FilterInputs | None:
        """The call's inputs, through the pod's shape when it is known; None when the body is not a
        names-form call this can read (the caller sends it the full way). Raises what the full
        path raises for a pod of a new shape (``ValidationError``, ``translate.BadRequest``)."""
        try:
            call = FilterCall.model_validate_json(body)
        except ValidationError:
            return None
        names = call.NodeNames
        if names is None or call.Nodes is not None or len(set(names)) != len(names):
            return None
        key = shape_key(call.Pod)
        if key is None:
            return None
        known = self._known(key)
        if known is None:
            # Read from the bytes again, not from ``call.Pod``: the model validated from JSON is what the
            # full path converts, and it converts faster than one validated from Python objects.
            args = ExtenderArgs.model_validate_json(body)
            known = translate.pod_info(args.Pod)
            self._remember(self._new, key, replace(known))  # a copy: the engine may set the attributes of its own
            self.read += 1
            return FilterInputs(known, args.Pod.metadata.resourceVersion or "", names)
        self.reused += 1
        meta = call.Pod.get("metadata", {})
        pod = replace(
            known,
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            creation_timestamp=meta.get("creationTimestamp"),
        )
        return FilterInputs(pod, meta.get("resourceVersion") or "", names)

    def _known(self, key: bytes) -> PodInfo | None:
        known = self._kept.get(key)
        if known is not None:
            self._kept.move_to_end(key)
            return known
        known = self._new.pop(key, None)
        if known is not None:
            self._remember(self._kept, key, known)
        return known

    def _remember(self, shapes: OrderedDict[bytes, PodInfo], key: bytes, pod: PodInfo) -> None:
        shapes[key] = pod
        while len(shapes) > self.size:
            shapes.popitem(last=False)
