"""What operators see through the real control plane: Events on gang pods and PodGroups, PodGroup
status, and every metric family moving on the replicas' /metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from devstack import http_client
from devstack.kube import resources, wait_for
from tests.e2e.conftest import Cluster
from tests.e2e.test_gangs import POD_GROUP, create_gang

pytestmark = pytest.mark.e2e

PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


def create_podgroup(cluster: Cluster, name: str, min_member: int, timeout_seconds: int | None = None) -> None:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    cluster.kube.create(PODGROUPS.format(ns=cluster.namespace), body)


def podgroup_status(cluster: Cluster, name: str) -> dict[str, Any]:
    obj = cluster.kube.get(f"{PODGROUPS.format(ns=cluster.namespace)}/{name}") or {}
    status: dict[str, Any] = obj.get("status") or {}
    return status


def reasons_by_object(cluster: Cluster) -> dict[tuple[str, str], set[str]]:
    """``{(kind, name): {reason, ...}}`` of the Events our replicas wrote in the test's namespace."""
    out: dict[tuple[str, str], set[str]] = {}
    for event in cluster.kube.events(cluster.namespace):
        if (event.get("source") or {}).get("component") != "kube-gang-extender":
            continue
        involved = event["involvedObject"]
        out.setdefault((involved["kind"], involved["name"]), set()).add(event["reason"])
    return out


def wait_for_reasons(cluster: Cluster, wanted: dict[tuple[str, str], set[str]], timeout: float = 30) -> None:
    def check() -> bool:
        seen = reasons_by_object(cluster)
        return all(reasons <= seen.get(obj, set()) for obj, reasons in wanted.items())

    try:
        wait_for(check, timeout, f"events {wanted}")
    except TimeoutError:
        raise AssertionError(f"events seen: {reasons_by_object(cluster)}\n{cluster.stack.logs()}") from None


def placed_gang(cluster: Cluster, name: str) -> list[str]:
    """A PodGroup of three one-CPU pods on three fresh nodes, bound."""
    cluster.nodes(3, cpu="4")
    cluster.wait_synced()
    create_podgroup(cluster, name, 3)
    names = create_gang(cluster, name, 3, 3, cpu="1", labels={POD_GROUP: name})
    cluster.wait_bound(names, timeout=60)
    return names


def test_a_completed_gang_has_its_events_and_its_podgroup_status(cluster: Cluster) -> None:
    names = placed_gang(cluster, "done")
    wanted = {("PodGroup", "done"): {"GangAdmitted", "GangPermitted"}}
    wanted.update({("Pod", name): {"GangPermitted"} for name in names})
    wait_for_reasons(cluster, wanted)
    # No kubelet runs here, so bound pods stay Pending: the group is scheduled, not running.
    status = wait_for(
        lambda: (s := podgroup_status(cluster, "done")).get("phase") == "Scheduled" and s,
        30,
        "the PodGroup status Scheduled",
    )
    assert status["scheduled"] == 3
    assert status["running"] == 0 and status["failed"] == 0
    assert status["scheduleStartTime"]


def test_a_rejected_gang_has_its_events_and_its_podgroup_status(cluster: Cluster) -> None:
    cluster.nodes(4, cpu="4")
    cluster.wait_synced()
    # Four members, room for all; one can go nowhere (its selector matches no node), so the three
    # others are held at bind until the group's 3 s window closes.
    create_podgroup(cluster, "short", 4, timeout_seconds=3)
    held = create_gang(cluster, "short", 3, 4, cpu="1", labels={POD_GROUP: "short"})
    cluster.pod("short-3", requests=resources(cpu="1"), labels={POD_GROUP: "short"}, nodeSelector={"role": "nowhere"})
    # Held for up to the window from the first member's bind; on a loaded machine kube-scheduler may
    # take a while to reach the binds (and a missed window means a cool-down before the next one).
    try:
        wait_for(lambda: _sum(cluster, "extender_gang_held_binds") >= 1, 60, "bind calls held", interval=0.1)
    except TimeoutError:
        try:
            gangs = cluster.stack.replicas[0].get(f"/v1/gangs/{cluster.namespace}/short", timeout=5).text
        except httpx.HTTPError as exc:
            gangs = f"unreadable ({exc})"
        raise AssertionError(f"no bind call held; the gang: {gangs}\n{cluster.stack.logs()}") from None
    wanted = {("PodGroup", "short"): {"GangAdmitted", "GangRejected"}}
    wanted.update({("Pod", name): {"GangRejected"} for name in held})
    wait_for_reasons(cluster, wanted, timeout=45)
    assert cluster.placement().get("short-0", "") == ""
    rejected = [
        e
        for e in cluster.kube.events(cluster.namespace)
        if e["reason"] == "GangRejected" and e["involvedObject"]["kind"] == "PodGroup"
    ]
    assert "window closed" in rejected[0]["message"] and rejected[0]["type"] == "Warning"
    status = wait_for(lambda: podgroup_status(cluster, "short") or None, 30, "a PodGroup status")
    assert status["phase"] in ("Pending", "Scheduling") and status["scheduled"] == 0
    assert status["scheduleStartTime"]


# Every family, and whether it must have moved (a sample above zero) once a gang completed.
FAMILIES: dict[str, bool] = {
    "extender_requests": True,
    "extender_request_duration_seconds": True,
    "extender_gangs": True,
    "extender_gang_admissions": True,
    "extender_gang_decisions": True,
    "extender_gang_window_seconds": True,
    "extender_gang_time_to_permit_seconds": True,
    "extender_gang_held_binds": False,  # moved: see the rejected gang's test
    "extender_gang_preemptions": False,  # moves when a gang is preempted whole (tests/e2e/test_gang_priority.py)
    "extender_gang_gates_removed": False,  # moves for pods created gated (tests/e2e/test_gang_gates.py)
    "extender_snapshot_generation": True,
    "extender_cluster_generation": True,
    "extender_snapshot_refresh_seconds": True,
    "extender_prioritize_cycle_snapshots": False,  # moves only where prioritize reaches the replica of its filter
    "extender_prioritize_ahead": False,  # the same (see the test below)
    "extender_watch_lag_seconds": True,
    "extender_watch_events": True,
    "extender_leader": True,
    "extender_leader_transitions": True,
    "extender_redis_command_duration_seconds": True,
    "extender_redis_errors": False,  # moves only when Redis fails (tests/integration)
    "extender_redis_primary_changes": False,  # moves only when Sentinel fails over (tests/integration)
    "extender_kube_events": True,
    "extender_podgroup_status_updates": True,
    "extender_equivalence_cache_requests": True,
    "extender_equivalence_cache_nodes": True,
    "extender_equivalence_cache_evictions": False,  # moves only when the cap or the TTL drops a class
    "extender_equivalence_cache_classes": True,
    "extender_equivalence_cache_enabled": True,
    "process_cpu_seconds": True,
    "process_resident_memory_bytes": True,
    "python_gc_collections": True,
    "extender_gc_seconds": True,
    "python_info": True,
}


def _families(cluster: Cluster) -> Iterable[Any]:
    for replica in cluster.stack.replicas:
        yield from text_string_to_metric_families(http_client.get(f"{replica.url}/metrics", timeout=5).text)


def _sum(cluster: Cluster, family: str, keep: Callable[[Any], bool] = lambda s: True) -> float:
    return sum(
        float(s.value)
        for f in _families(cluster)
        if f.name == family
        for s in f.samples
        if keep(s) and not s.name.endswith(("_bucket", "_created"))
    )


def test_every_metric_family_appears_and_moves(cluster: Cluster) -> None:
    placed_gang(cluster, "metered")
    wait_for_reasons(cluster, {("PodGroup", "metered"): {"GangPermitted"}})
    try:
        wait_for(lambda: podgroup_status(cluster, "metered").get("phase") == "Scheduled", 30, "status written")
    except TimeoutError:
        raise AssertionError(f"{podgroup_status(cluster, 'metered')}\n{cluster.stack.logs()}") from None
    families = list(_families(cluster))
    present = {f.name for f in families}
    assert set(FAMILIES) <= present, f"missing: {set(FAMILIES) - present}"
    for name, moves in FAMILIES.items():
        if moves:
            total = sum(s.value for f in families if f.name == name for s in f.samples)
            assert total > 0, f"{name} never moved"
    assert not any(s.name.endswith("_created") for f in families for s in f.samples)
    # The leader is exactly one of the replicas; the permit was timed.
    assert _sum(cluster, "extender_leader") == 1
    assert _sum(cluster, "extender_gang_decisions", lambda s: s.labels.get("outcome") == "permitted") >= 1
    lua = _sum(cluster, "extender_redis_command_duration_seconds", lambda s: s.labels.get("command") == "gang_arrive")
    assert lua > 0


def test_kube_schedulers_prioritize_takes_the_scores_computed_after_its_filter(cluster: Cluster) -> None:
    """kube-scheduler asks prioritize about exactly the nodes filter passed, in that order: the scores
    computed once filter has answered are what it gets (when both calls reach one replica, which
    its keep-alive connection makes the rule)."""

    def ahead(outcome: str) -> float:
        return _sum(cluster, "extender_prioritize_ahead", lambda s: s.labels.get("outcome") == outcome)

    before = (ahead("computed"), ahead("used"))
    cluster.nodes(3, cpu="8")
    cluster.wait_synced()
    names = [f"ahead-{i}" for i in range(4)]
    for name in names:
        cluster.pod(name, requests=resources(cpu="1"))
    cluster.wait_bound(names, timeout=60)
    computed, used = ahead("computed") - before[0], ahead("used") - before[1]
    assert computed >= len(names), (computed, used)  # every pod had several nodes to choose from
    assert used >= 1, f"no prioritize call took the scores computed ahead ({computed} computed)\n{cluster.stack.logs()}"
