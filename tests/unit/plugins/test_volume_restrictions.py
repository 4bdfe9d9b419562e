"""VolumeRestrictions (NoDiskConflict): volumes that cannot be mounted twice on one node."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.gen_cluster import make_node, make_pod, run_predicate


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
