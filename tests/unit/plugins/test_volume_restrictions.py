"""VolumeRestrictions (NoDiskConflict): volumes that cannot be mounted twice on one node, and claims only
one pod may use (ReadWriteOncePod)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from extenders.model import PodInfo, PVCInfo
from extenders.plugins.framework import FIT, Verdict
from extenders.plugins.volume_restrictions import (
    READ_WRITE_ONCE_POD_REASON,
    REASON,
    VolumeRestrictionsFilter,
    claim_users,
)
from extenders.snapshot import Snapshot
from tests.plugin_cases import make_node, make_pod, make_snapshot, run_predicate


def _with_volume(name: str, volume: dict[str, Any]) -> Any:
    return make_pod(name, spec={"volumes": [{"name": "v", **volume}]})


def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"gcePersistentDisk": {"pdName": pd, "readOnly": ro}}


def ebs(vol: str, ro: bool = False) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": vol, "readOnly": ro}}


def rbd(monitors: list[str], image: str, ro: bool = False, pool: str = "rbd") -> dict[str, Any]:
    return {"rbd": {"monitors": monitors, "image": image, "pool": pool, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"iscsi": {"targetPortal": "1.2.3.4:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


@pytest.mark.parametrize(
    ("wanted", "existing", "fit"),
    [
        (gce("a"), gce("b"), True),
        (gce("a"), gce("a"), False),
        (gce("a", True), gce("a", True), True),
        (gce("a", True), gce("a"), False),
        (ebs("a"), ebs("b"), True),
        (ebs("a", True), ebs("a", True), False),  # EBS conflicts even read-only
        (rbd(["m1"], "i"), rbd(["m2"], "i"), True),
        (rbd(["m1", "m2"], "i"), rbd(["m2"], "i"), False),
        (rbd(["m1"], "i", True), rbd(["m1"], "i", True), True),
        (rbd(["m1"], "i"), rbd(["m1"], "j"), True),
        (rbd(["m1"], "i"), rbd(["m1"], "i", pool="other"), True),
        (iscsi("q1"), iscsi("q2"), True),
        (iscsi("q1"), iscsi("q1"), False),
        (iscsi("q1", True), iscsi("q1", True), True),
        (gce("a"), ebs("a"), True),
    ],
)
def test_no_disk_conflict(wanted: dict[str, Any], existing: dict[str, Any], fit: bool) -> None:
    node = make_node(pods=[_with_volume("existing", existing)])
    verdict = run_predicate("NoDiskConflict", _with_volume("p", wanted), node)
    assert verdict == (Verdict(True) if fit else Verdict(False, "node(s) had no available disk"))


# ---------------------------------------------------------------- ReadWriteOncePod
RWOP_FAIL = Verdict(False, READ_WRITE_ONCE_POD_REASON)  # resolvable: preemption may evict the user
CLAIMS = {
    "default/solo": PVCInfo("default", "solo", read_write_once_pod=True),
    "default/shared": PVCInfo("default", "shared", read_write_once_pod=False),
    "team/solo": PVCInfo("team", "solo", read_write_once_pod=True),
}


def claiming(name: str, claim: str, namespace: str = "default", node: str = "", deleting: bool = False) -> PodInfo:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
    return make_pod(name, namespace, node_name=node, spec={"volumes": [volume]}, deleting=deleting)


def rwop_snapshot(*placed: PodInfo, pending: tuple[PodInfo, ...] = ()) -> Snapshot:
    snapshot = make_snapshot(
        make_node("n1", pods=[p for p in placed if p.node_name == "n1"]),
        make_node("n2", pods=[p for p in placed if p.node_name == "n2"]),
    )
    snapshot.objects = {"pvcs": dict(CLAIMS)}
    snapshot.pending = {p.uid: p for p in pending}
    return snapshot


def _terminated(pod: PodInfo) -> PodInfo:
    return dataclasses.replace(pod, phase="Succeeded")


INCOMING = claiming("p", "solo")


@pytest.mark.parametrize(
    ("incoming", "placed", "pending", "verdict"),
    [
        pytest.param(INCOMING, [claiming("user", "solo", node="n2")], [], RWOP_FAIL, id="in-use"),
        pytest.param(INCOMING, [], [], FIT, id="not-in-use"),
        pytest.param(INCOMING, [claiming("other", "other", node="n2")], [], FIT, id="another-claim-in-use"),
        # the incoming pod itself, assumed on n1 by an earlier bind of ours
        pytest.param(INCOMING, [dataclasses.replace(INCOMING, node_name="n1")], [], FIT, id="same-pod"),
        pytest.param(INCOMING, [_terminated(claiming("done", "solo", node="n2"))], [], FIT, id="terminated-user"),
        pytest.param(
            INCOMING, [claiming("going", "solo", node="n2", deleting=True)], [], RWOP_FAIL, id="terminating-user"
        ),
        pytest.param(INCOMING, [], [claiming("waiting", "solo")], FIT, id="pending-user-not-placed"),
        pytest.param(
            claiming("p", "shared"), [claiming("user", "shared", node="n2")], [], FIT, id="not-read-write-once-pod"
        ),
        pytest.param(
            INCOMING, [claiming("user", "solo", namespace="team", node="n2")], [], FIT, id="same-name-other-namespace"
        ),
        pytest.param(claiming("p", "unknown"), [claiming("user", "unknown", node="n2")], [], FIT, id="unknown-claim"),
    ],
)
def test_read_write_once_pod(
    incoming: PodInfo, placed: list[PodInfo], pending: list[PodInfo], verdict: Verdict
) -> None:
    snapshot = rwop_snapshot(*placed, pending=tuple(pending))
    assert {n: run_predicate("NoDiskConflict", incoming, node, snapshot) for n, node in snapshot.nodes.items()} == {
        "n1": verdict,
        "n2": verdict,
    }


def test_read_write_once_pod_conflict_is_resolvable_by_evicting_the_user() -> None:
    user = claiming("user", "solo", node="n2")
    snapshot = rwop_snapshot(user, claiming("bystander", "other", node="n1"))
    predicate = VolumeRestrictionsFilter()
    state = predicate.prepare(INCOMING, snapshot)
    assert not predicate.cacheable(state)
    n2 = snapshot.nodes["n2"]
    assert predicate.check(INCOMING, n2, state) == RWOP_FAIL and not RWOP_FAIL.unresolvable
    without_user = make_node("n2", pods=[])
    adjusted = predicate.adjust(state, INCOMING, n2, without_user)
    assert predicate.check(INCOMING, without_user, adjusted) == FIT
    assert predicate.check(INCOMING, n2, state) == RWOP_FAIL  # the prepared state is untouched
    # removing an unrelated pod changes nothing
    n1 = snapshot.nodes["n1"]
    assert predicate.adjust(state, INCOMING, n1, make_node("n1", pods=[])) is state


def test_disk_conflict_is_reported_before_read_write_once_pod() -> None:
    disk = {"name": "d", "gcePersistentDisk": {"pdName": "a"}}
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "solo"}}
    incoming = make_pod("p", spec={"volumes": [disk, claim]})
    holder = make_pod("holder", node_name="n1", spec={"volumes": [disk]})
    snapshot = rwop_snapshot(holder, claiming("user", "solo", node="n2"))
    assert run_predicate("NoDiskConflict", incoming, snapshot.nodes["n1"], snapshot) == Verdict(False, REASON)
    assert run_predicate("NoDiskConflict", incoming, snapshot.nodes["n2"], snapshot) == RWOP_FAIL
    # with the claim free, only the disk decides and the verdicts may be cached per node
    free = rwop_snapshot(holder)
    predicate = VolumeRestrictionsFilter()
    assert predicate.cacheable(predicate.prepare(incoming, free))
    assert run_predicate("NoDiskConflict", incoming, free.nodes["n2"], free) == FIT


def test_two_snapshots_in_use_at_once_keep_their_own_claim_users() -> None:
    """Each snapshot keeps who uses which claim in its own summary: alternating between two (as
    explain or preempt on an older snapshot beside the current one do) answers both rightly and
    rebuilds neither."""
    busy = rwop_snapshot(claiming("user", "solo", node="n2"))
    idle = rwop_snapshot(claiming("other", "shared", node="n1"))
    kept = {"busy": claim_users(busy), "idle": claim_users(idle)}
    assert kept == {"busy": {"default/solo": ["uid-default-user"]}, "idle": {"default/shared": ["uid-default-other"]}}
    for _ in range(2):
        for snapshot, verdict in ((busy, RWOP_FAIL), (idle, FIT)):
            assert run_predicate("NoDiskConflict", INCOMING, snapshot.nodes["n1"], snapshot) == verdict
    assert claim_users(busy) is kept["busy"] and claim_users(idle) is kept["idle"]
    # A node's claims changing in place is seen at once.
    busy.nodes["n1"].add_pod(claiming("late", "solo", node="n1"))
    assert sorted(claim_users(busy)["default/solo"]) == ["uid-default-late", "uid-default-user"]
