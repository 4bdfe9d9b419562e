"""The fake API server's discovery documents (``/version``, ``/api``, ``/apis`` and each group version):
what client libraries read before they call."""

from __future__ import annotations

from .errors import Json
from .resources import PODS, ResourceType

SERVER_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake", "platform": "linux/amd64"}


def discovery(path: str, served: list[ResourceType]) -> Json | None:
    """The discovery document kube-apiserver serves at ``path`` for the ``served`` types, or None."""
    path = path.rstrip("/")
    if path == "/version":
        return SERVER_VERSION
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups: dict[str, str] = {rt.group: rt.api_version for rt in served if rt.group}
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for g, gv in groups.items()
            ],
        }
    in_gv = [rt for rt in served if rt.prefix == path]
    if not in_gv:
        return None
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    resources: list[Json] = []
    for rt in in_gv:
        resources.append(
            {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": verbs,
            }
        )
        resources.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
        if rt is PODS:
            resources.append(
                {
                    "name": "pods/binding",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": in_gv[0].api_version,
        "resources": resources,
    }
