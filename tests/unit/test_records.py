"""Redis records of the scheduling view: round trips through JSON, compact by default."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from extenders.model import Owner, PodInfo
from extenders.sync.convert import (
    controller_info,
    namespace_info,
    node_facts,
    pdb_info,
    pod_info,
    podgroup_info,
    pvc_info,
    service_info,
)
from extenders.sync.kinds import KINDS, NAMESPACES, PDBS, PODGROUPS, PVCS, REPLICA_SETS, SERVICES
from extenders.sync.records import (
    CONTROLLER,
    NAMESPACE,
    NODE,
    NODE_FIELD,
    PDB,
    POD,
    PODGROUP,
    PVC,
    SERVICE,
    RecordCodec,
    decode_node_hash,
)
from tests.unit.k8s_objects import full_pod, node_object


def test_pod_record_round_trip_through_json() -> None:
    pod = pod_info(full_pod())
    pod.assumed = True
    back = POD.decode(orjson.loads(orjson.dumps(POD.encode(pod))))
    assert back == pod


def test_minimal_pod_record_is_compact_and_round_trips() -> None:
    pod = pod_info({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c"}]}})
    assert pod.namespace == "default" and pod.best_effort and pod.owner is None
    rec = POD.encode(pod)
    assert set(rec) == {"ns", "n", "u", "nzc", "nzm", "be"}
    assert POD.decode(orjson.loads(orjson.dumps(rec))) == pod


def test_node_facts_round_trip_keeps_the_resource_version_outside() -> None:
    facts = node_facts(node_object())
    raw = NODE.dumps(facts)
    assert b"42" not in raw  # the resourceVersion lives in its own hash: a heartbeat rewrites nothing
    assert NODE.loads(raw, resource_version="42") == facts


def test_pdb_round_trip() -> None:
    pdb = pdb_info(
        {
            "metadata": {"name": "b", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 2},
        }
    )
    assert (pdb.key, pdb.disruptions_allowed, pdb.selector) == ("ns/b", 2, {"matchLabels": {"app": "web"}})
    assert PDBS.decode(pdb.key, PDB.dumps(pdb)) == pdb


def test_podgroup_round_trip() -> None:
    group = podgroup_info(
        {
            "metadata": {"name": "g", "namespace": "ml", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 30},
        }
    )
    assert (group.key, group.min_member, group.schedule_timeout_seconds) == ("ml/g", 4, 30)
    rec = PODGROUP.encode(group)
    assert rec["minMember"] == 4 and rec["creationTimestamp"] == "2024-01-01T00:00:00Z"
    assert PODGROUPS.decode("ml/g", orjson.dumps(rec)) == group
    bare = podgroup_info({"metadata": {"name": "h"}, "spec": {}})
    assert PODGROUPS.decode(bare.key, PODGROUP.dumps(bare)) == bare


@pytest.mark.parametrize(
    ("labels", "record"),
    [
        (
            {"kubernetes.io/metadata.name": "team-a", "team": "a"},
            {"l": {"kubernetes.io/metadata.name": "team-a", "team": "a"}},
        ),
        (None, {}),  # no labels at all: an empty record
    ],
)
def test_namespace_round_trip(labels: dict[str, str] | None, record: dict[str, object]) -> None:
    namespace = namespace_info({"metadata": {"name": "team-a", "labels": labels, "uid": "x"}, "status": {}})
    assert (namespace.name, namespace.labels) == ("team-a", labels or {})
    assert NAMESPACE.encode(namespace) == record  # the name is the hash key, not in the record
    assert NAMESPACES.decode("team-a", NAMESPACE.dumps(namespace)) == namespace


@pytest.mark.parametrize(
    ("modes", "rwop", "record"),
    [
        (["ReadWriteOncePod"], True, {"rwop": True}),
        (["ReadWriteOnce", "ReadWriteOncePod"], True, {"rwop": True}),
        (["ReadWriteOnce"], False, {}),
        (["ReadOnlyMany", "ReadWriteMany"], False, {}),
        (None, False, {}),
    ],
)
def test_pvc_keeps_only_whether_it_is_read_write_once_pod(
    modes: list[str] | None, rwop: bool, record: dict[str, object]
) -> None:
    claim = pvc_info({"metadata": {"name": "data", "namespace": "db"}, "spec": {"accessModes": modes}})
    assert (claim.key, claim.read_write_once_pod) == ("db/data", rwop)
    assert PVC.encode(claim) == record
    assert PVCS.decode(claim.key, PVC.dumps(claim)) == claim
    assert pvc_info({"metadata": {"name": "data"}, "spec": {}}).key == "default/data"


@pytest.mark.parametrize(
    ("codec", "kept_elsewhere"),
    [
        (POD, set()),
        (NODE, {"resource_version"}),
        # A kind's record leaves its identity to the key.
        *((kind.codec, {"name"} if kind.cluster_scoped else {"namespace", "name"}) for kind in KINDS),
    ],
)
def test_every_attribute_has_a_column(codec: RecordCodec[object], kept_elsewhere: set[str]) -> None:
    """A field added to the view and not to its table would silently vanish on the way through Redis."""
    attrs = {f.name for f in dataclasses.fields(codec.cls)}  # type: ignore[arg-type]
    stored = {c.attr for c in codec.columns}
    assert attrs - stored == kept_elsewhere
    keys = [c.key for c in codec.columns]
    assert len(keys) == len(set(keys))


def test_unknown_record_keys_are_ignored() -> None:
    """A record written by a newer replica during a rolling upgrade still decodes."""
    pod = pod_info(full_pod())
    assert POD.decode({**POD.encode(pod), "future": 1}) == pod


def test_node_hash_decodes_facts_and_pods_and_skips_bookkeeping() -> None:
    facts = node_facts(node_object())
    pod = dataclasses.replace(pod_info(full_pod()), node_name="n1")
    fields = {NODE_FIELD: NODE.dumps(facts), pod.uid: POD.dumps(pod), "_stamp": b"x"}
    decoded, pods = decode_node_hash(fields, "42")
    assert decoded == facts and pods == {pod.uid: pod}
    reused: dict[str, bytes] = {}

    def remember(uid: str, raw: bytes) -> PodInfo:
        reused[uid] = raw
        return pod

    assert decode_node_hash(fields, "42", remember)[1] == {pod.uid: pod}
    assert list(reused) == [pod.uid]


def test_a_pods_scoring_defaults_round_trip() -> None:
    """The pair the scorers count for a pod with pod-level requests survives Redis as a tuple."""
    spec = {
        "containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
        "resources": {"requests": {"memory": "1Gi"}},
    }
    pod = pod_info({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    assert pod.score_nonzero == (1100, 400 * 2**20)
    assert POD.decode(orjson.loads(orjson.dumps(POD.encode(pod)))) == pod


@pytest.mark.parametrize(
    ("spec", "record"),
    [
        ({"selector": {"app": "web"}, "ports": [{"port": 80}], "clusterIP": "10.0.0.1"}, {"s": {"app": "web"}}),
        ({"type": "ExternalName", "externalName": "example.org"}, {}),  # no selector: an empty record
    ],
)
def test_service_keeps_only_its_selector(spec: dict[str, object], record: dict[str, object]) -> None:
    service = service_info({"metadata": {"name": "web", "namespace": "shop", "uid": "x"}, "spec": spec})
    assert SERVICE.encode(service) == record  # namespace/name is the hash key, not in the record
    assert SERVICES.decode("shop/web", SERVICE.dumps(service)) == service


@pytest.mark.parametrize(
    ("selector", "record"),
    [
        ({"app": "old"}, {"s": {"app": "old"}}),  # a ReplicationController's map
        (
            {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "t", "operator": "Exists"}]},
            {"s": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "t", "operator": "Exists"}]}},
        ),
        ({}, {"s": {}}),  # an empty selector is kept apart from a missing one
        (None, {}),
    ],
)
def test_controller_keeps_only_its_selector(selector: dict[str, object] | None, record: dict[str, object]) -> None:
    spec = {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}
    if selector is not None:
        spec["selector"] = selector
    controller = controller_info({"metadata": {"name": "web-1", "namespace": "shop"}, "spec": spec, "status": {}})
    assert CONTROLLER.encode(controller) == record
    assert REPLICA_SETS.decode("shop/web-1", CONTROLLER.dumps(controller)) == controller


def test_an_owner_round_trips_with_its_api_version_and_controller_flag() -> None:
    for owner in (
        Owner("ReplicaSet", "rs", "u", "apps/v1", True),
        Owner("Job", "j", "u", "batch/v1"),
        Owner("X", "x", "u"),
    ):
        pod = PodInfo("ns", "p", "uid", owner=owner)
        assert POD.loads(POD.dumps(pod)).owner == owner
    assert POD.encode(PodInfo("ns", "p", "uid", owner=Owner("X", "x", "u")))["own"] == ["X", "x", "u"]  # compact
    # a record written before the two were kept decodes as an owner that does not control
    assert POD.decode({"ns": "ns", "n": "p", "u": "uid", "own": ["ReplicaSet", "rs", "u"]}).owner == Owner(
        "ReplicaSet", "rs", "u"
    )
