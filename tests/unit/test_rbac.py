"""deploy/'s ClusterRole grants exactly the API calls the code makes: no call left out, nothing extra.

The watched collections come from the watcher's own table (list and watch each); the single calls
from the client's methods, one row each below. A new client method fails the last test until it is
given its row, and with it the permission it needs.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import yaml

from extenders.kube.client import KubeClient
from extenders.sync.watcher import watched as watched_kinds

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"

Grant = tuple[str, str, str]  # (API group, resource, verb)

# KubeClient's methods and what each needs; () for those that add no permission of their own.
CLIENT_CALLS: dict[str, tuple[Grant, ...]] = {
    "get": (),  # the generic GET, used through the methods below
    "get_pod": (("", "pods", "get"),),  # bind checks the pod it is asked to bind
    "has_podgroups": (),  # a list of the PodGroup collection (granted with the watch)
    "readable": (),  # a list with limit=1 of a watched collection
    "list": (),
    "watch": (),
    "annotate_pod": (("", "pods", "patch"),),  # requeue of parked pods
    "remove_scheduling_gate": (("", "pods", "patch"),),  # the gang assembly gate
    "preempt_pod": (("", "pods/status", "patch"), ("", "pods", "delete")),  # a preempted gang's other members
    "create_event": (("", "events", "create"),),
    "patch_event": (("", "events", "patch"),),
    "patch_podgroup_status": (("scheduling.x-k8s.io", "podgroups/status", "patch"),),
    "bind_pod": (("", "pods/binding", "create"),),
    "aclose": (),
}


def granted() -> set[Grant]:
    (role,) = [d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    out: set[Grant] = set()
    for rule in role["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out |= {(group, resource, verb) for verb in rule["verbs"]}
    return out


def watched() -> set[Grant]:
    out: set[Grant] = set()
    for resource in watched_kinds():
        parts = resource.path.strip("/").split("/")
        # /api/v1/<resource> or /apis/<group>/<version>/<resource>
        group = "" if parts[0] == "api" else parts[1]
        out |= {(group, parts[-1], "list"), (group, parts[-1], "watch")}
    return out


def test_the_cluster_role_is_exactly_the_calls_the_code_makes() -> None:
    needed = watched() | {grant for grants in CLIENT_CALLS.values() for grant in grants}
    have = granted()
    assert needed - have == set(), "calls the code makes that the ClusterRole does not grant"
    assert have - needed == set(), "permissions no call of the code uses"


def test_every_client_method_has_its_row() -> None:
    methods = {name for name, _ in inspect.getmembers(KubeClient, inspect.isfunction) if not name.startswith("_")}
    assert methods == set(CLIENT_CALLS)


def test_the_binding_names_the_base_service_account() -> None:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": account["metadata"]["namespace"]}
    ]
