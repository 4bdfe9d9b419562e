"""Reading an API object's metadata, for code that holds the object as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.model import DEFAULT_NAMESPACE


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object, with the API server's default namespace."""
    meta = metadata(obj)
    return f"{meta.get('namespace') or DEFAULT_NAMESPACE}/{meta.get('name') or ''}"


def describe(resource: str, obj: Any) -> str:
    """``resource namespace/name`` of an object that may be malformed, for a log line that must not raise."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return f"{resource} <no metadata>"
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{resource} {namespace}/{name}" if namespace else f"{resource} {name}"
