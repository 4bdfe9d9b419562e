"""Redis records of the scheduling view: round trips through JSON, compact by default."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from extenders.convert import node_facts, pdb_info, pod_info, podgroup_info
from extenders.model import PodInfo
from extenders.records import NODE, NODE_FIELD, PDB, POD, PODGROUP, RecordCodec, decode_node_hash, podgroup_from
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
    assert PDB.loads(PDB.dumps(pdb)) == pdb


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
    assert podgroup_from("ml/g", orjson.dumps(rec)) == group
    bare = podgroup_info({"metadata": {"name": "h"}, "spec": {}})
    assert podgroup_from(bare.key, PODGROUP.dumps(bare)) == bare


@pytest.mark.parametrize(
    ("codec", "kept_elsewhere"),
    [(POD, set()), (NODE, {"resource_version"}), (PDB, set()), (PODGROUP, {"namespace", "name"})],
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
