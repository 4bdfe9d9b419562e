"""What the fake API server does to the objects it stores: defaults and admission mutations, merge
patches, preconditions. The store calls these as it commits objects and revisions."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from . import errors
from .errors import ApiError, Json
from .resources import ResourceType

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def now_rfc3339(offset_seconds: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also used, simplified, for strategic merge patches)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def storage_precondition_error(rtype: ResourceType, key: Key, rv: int, what: str) -> ApiError:
    """The wording of an etcd3 precondition failure as kube-apiserver surfaces it (a Conflict)."""
    ns, name = key
    path = f"/registry/{rtype.plural}/{ns}/{name}" if ns else f"/registry/{rtype.plural}/{name}"
    why = (
        f"StorageError: invalid object, Code: 4, Key: {path}, ResourceVersion: {rv}, "
        f"AdditionalErrorMsg: Precondition failed: {what}"
    )
    return errors.conflict(rtype.plural, name, why, rtype.group)


def check_preconditions(rtype: ResourceType, key: Key, obj: Json, uid: str | None, rv: str | None) -> None:
    meta = obj["metadata"]
    if uid and uid != meta["uid"]:
        what = f"UID in precondition: {uid}, UID in object meta: {meta['uid']}"
        raise storage_precondition_error(rtype, key, 0, what)
    if rv and rv != meta["resourceVersion"]:
        current = meta["resourceVersion"]
        what = f"ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {current}"
        raise storage_precondition_error(rtype, key, 0, what)


_POD_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def label_namespace(namespace: Json) -> None:
    """The API server keeps every namespace labelled with its own name (namespaceSelectors rely on it)."""
    meta = namespace["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: meta["name"]}


def default_pod(pod: Json) -> None:
    """The defaults and admission mutations kube-scheduler-relevant code would see on a real pod."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    tolerations = spec.setdefault("tolerations", [])
    for default in _POD_DEFAULT_TOLERATIONS:  # DefaultTolerationSeconds admission
        if not any(t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
            tolerations.append(dict(default))
    pod["status"] = {"phase": "Pending"}


def pod_spec_for_compare(spec: Json) -> Json:
    """A pod spec with the fields an update may change blanked out (image, deadline, tolerations, gates)."""
    spec = copy.deepcopy(spec)
    for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        spec.pop(key, None)
    for group in ("containers", "initContainers"):
        for container in spec.get(group) or []:
            container.pop("image", None)
    return spec
