"""Request bodies the hostile-input tests share."""

from __future__ import annotations


def pod_of(spec: object) -> dict[str, object]:
    """A pod with a valid identity and ``spec`` as given, however wrong."""
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": spec}
