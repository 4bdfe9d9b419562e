"""The spreading scorers' default selector: a pod's Services and controller, as helper.DefaultSelector."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from extenders.model import ControllerInfo, NodeInfo, ServiceInfo
from extenders.plugins.helper.default_selector import build_default_selector, default_query
from extenders.snapshot import Snapshot
from tests.unit.plugins.spread import node, pod

WEB = {"app": "web", "tier": "front"}
RS_SELECTOR = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
RS_REQUIREMENTS = [
    {"key": "app", "operator": "In", "values": ["web"]},
    {"key": "tier", "operator": "Exists"},
]


def svc(name: str, selector: dict[str, str] | None, namespace: str = "default") -> ServiceInfo:
    return ServiceInfo(namespace, name, dict(selector or {}))


def ctl(name: str, selector: dict[str, Any] | None, namespace: str = "default") -> ControllerInfo:
    return ControllerInfo(namespace, name, selector)


def _snapshot(
    services: Sequence[ServiceInfo] = (),
    replication_controllers: Sequence[ControllerInfo] = (),
    replica_sets: Sequence[ControllerInfo] = (),
    stateful_sets: Sequence[ControllerInfo] = (),
) -> Snapshot:
    return Snapshot(
        objects={
            "services": {s.key: s for s in services},
            "replication_controllers": {c.key: c for c in replication_controllers},
            "replica_sets": {c.key: c for c in replica_sets},
            "stateful_sets": {c.key: c for c in stateful_sets},
        }
    )


RC = {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc"}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}
SS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "ss"}


@pytest.mark.parametrize(
    ("owner", "tables", "expected"),
    [
        pytest.param(None, {}, None, id="nothing-watched"),
        pytest.param(None, {"services": [svc("s", {"app": "web"})]}, {"matchLabels": {"app": "web"}}, id="service"),
        pytest.param(None, {"services": [svc("s", {"app": "db"})]}, None, id="service-not-matching"),
        pytest.param(
            None, {"services": [svc("s", {"app": "web"}, namespace="other")]}, None, id="service-other-namespace"
        ),
        pytest.param(None, {"services": [svc("s", {})]}, None, id="empty-service-selector-ignored"),
        pytest.param(
            None,
            {"services": [svc("s", {}), svc("t", {"app": "web"}), svc("u", {"tier": "front"})]},
            {"matchLabels": {"app": "web", "tier": "front"}},
            id="services-merged",
        ),
        pytest.param(
            RC,
            {"replication_controllers": [ctl("rc", {"app": "web", "rc": "1"})]},
            {"matchLabels": {"app": "web", "rc": "1"}},
            id="replication-controller",
        ),
        pytest.param(
            RC,
            {"services": [svc("s", {"tier": "front"})], "replication_controllers": [ctl("rc", {"app": "web"})]},
            {"matchLabels": {"tier": "front", "app": "web"}},
            id="service-and-replication-controller",
        ),
        pytest.param(
            RS,
            {"replica_sets": [ctl("rs", RS_SELECTOR)]},
            {"matchExpressions": RS_REQUIREMENTS},
            id="replica-set",
        ),
        pytest.param(
            SS,
            {"services": [svc("s", {"app": "web"})], "stateful_sets": [ctl("ss", RS_SELECTOR)]},
            {"matchLabels": {"app": "web"}, "matchExpressions": RS_REQUIREMENTS},
            id="service-and-stateful-set",
        ),
        pytest.param(RS, {"replica_sets": [ctl("rs", {})]}, None, id="replica-set-empty-selector"),
        pytest.param(RS, {"replica_sets": [ctl("rs", None)]}, None, id="replica-set-no-selector"),
        pytest.param(
            RS,
            {
                "services": [svc("s", {"app": "web"})],
                "replica_sets": [ctl("rs", {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]})],
            },
            {"matchLabels": {"app": "web"}},
            id="replica-set-invalid-selector",
        ),
        pytest.param(RS, {"replica_sets": [ctl("other", RS_SELECTOR)]}, None, id="owner-not-found"),
        pytest.param(RS, {"replica_sets": [ctl("rs", RS_SELECTOR, namespace="other")]}, None, id="owner-other-ns"),
        pytest.param(
            {**RS, "controller": False}, {"replica_sets": [ctl("rs", RS_SELECTOR)]}, None, id="owner-not-controller"
        ),
        pytest.param(
            {**RS, "apiVersion": "extensions/v1beta1"},
            {"replica_sets": [ctl("rs", RS_SELECTOR)]},
            None,
            id="replica-set-other-api-version",
        ),
        pytest.param(
            {**RC, "apiVersion": "apps/v1"},
            {"replication_controllers": [ctl("rc", {"app": "web"})]},
            None,
            id="replication-controller-other-api-version",
        ),
        pytest.param(
            {**RS, "name": "ss"},
            {"stateful_sets": [ctl("ss", RS_SELECTOR)]},
            None,
            id="looked-up-by-kind",
        ),
        pytest.param(
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j"},
            {"replica_sets": [ctl("j", RS_SELECTOR)]},
            None,
            id="unsupported-owner",
        ),
    ],
)
def test_default_selector(owner: dict[str, Any] | None, tables: dict[str, Any], expected: Any) -> None:
    incoming = pod("in", labels=WEB, owner=owner)
    assert build_default_selector(incoming, _snapshot(**tables)) == expected


def _web_nodes() -> list[NodeInfo]:
    return [
        node("n1", pods=[pod("a", "n1", {"app": "web", "tier": "front"}), pod("b", "n1", {"app": "web"})]),
        node("n2", pods=[pod("c", "n2", {"app": "web", "tier": "back"}), pod("d", "n2", {"tier": "front"})]),
    ]


def test_a_controller_requirement_on_a_service_key_narrows_rather_than_overrides() -> None:
    """A Service's map and a ReplicaSet's matchLabels on the same key are both required."""
    snap = _snapshot(
        services=[svc("s", {"app": "web"})],
        replica_sets=[ctl("rs", {"matchLabels": {"tier": "front"}})],
    )
    snap.nodes = {n.name: n for n in _web_nodes()}
    query = default_query(pod("in", labels=WEB, owner=RS), snap)
    assert query is not None
    assert [query.count(n) for n in snap.nodes.values()] == [1, 0]  # only "a" is app=web and tier=front
    clash = _snapshot(
        services=[svc("s", {"app": "web"})],
        replica_sets=[ctl("rs", {"matchLabels": {"app": "api"}})],
    )
    clash.nodes = snap.nodes
    query = default_query(pod("in", labels=WEB, owner=RS), clash)
    assert query is not None and [query.count(n) for n in clash.nodes.values()] == [0, 0]


def test_default_query_is_remembered_per_tables_and_pod_shape() -> None:
    services = {"default/s": svc("s", {"app": "web"})}
    snap = Snapshot(nodes={n.name: n for n in _web_nodes()}, objects={"services": services}, sealed=True)
    first = default_query(pod("p1", labels=WEB), snap)
    assert first is not None
    assert default_query(pod("p2", labels=WEB), snap) is first  # another pod of the template
    assert default_query(pod("p3", labels={"app": "db"}), snap) is None
    # a node-only change keeps the tables (the replica cache derives the next summary): still remembered
    later = dataclasses.replace(snap, nodes=dict(snap.nodes), summary_seed=snap.seed())
    assert default_query(pod("p4", labels=WEB), later) is first
    # a new Service table is read afresh
    changed = dataclasses.replace(
        snap, objects={"services": {"default/s": svc("s", {"app": "db"})}}, summary_seed=snap.seed()
    )
    assert default_query(pod("p5", labels=WEB), changed) is None
    # an unsealed snapshot (edited in place) is never remembered
    table = dict(services)
    loose = Snapshot(objects={"services": table})
    assert default_query(pod("p6", labels=WEB), loose) is not None
    table.clear()
    assert default_query(pod("p6", labels=WEB), loose) is None
