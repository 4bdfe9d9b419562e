"""NoDiskConflict: kube-scheduler's VolumeRestrictions filter, for the volume types that still apply.

Two pods conflict on a node when they mount the same GCE PD (unless both read-only), the
same AWS EBS volume (always), the same RBD image from an overlapping monitor set (unless
both read-only) or the same iSCSI IQN (unless both read-only). The plugin's
ReadWriteOncePod check needs PersistentVolumeClaim access modes, which the snapshot does
not hold, so it is not done here. Resolvable: evicting the other pod frees the disk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, Verdict
from extenders.snapshot import Snapshot

REASON = "node(s) had no available disk"
_FAIL = Verdict(False, REASON)
_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def volumes_conflict(volume: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    """Whether mounting ``volume`` next to an already mounted ``existing`` is refused."""
    gce, other_gce = volume.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
    if (
        gce is not None
        and other_gce is not None
        and gce.get("pdName") == other_gce.get("pdName")
        and not (gce.get("readOnly") and other_gce.get("readOnly"))
    ):
        return True
    ebs, other_ebs = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
    if ebs is not None and other_ebs is not None and ebs.get("volumeID") == other_ebs.get("volumeID"):
        return True
    iscsi, other_iscsi = volume.get("iscsi"), existing.get("iscsi")
    if (
        iscsi is not None
        and other_iscsi is not None
        and iscsi.get("iqn") == other_iscsi.get("iqn")
        and not (iscsi.get("readOnly") and other_iscsi.get("readOnly"))
    ):
        return True
    rbd, other_rbd = volume.get("rbd"), existing.get("rbd")
    if rbd is not None and other_rbd is not None:
        same_pool = (rbd.get("pool") or "rbd") == (other_rbd.get("pool") or "rbd")
        same_image = same_pool and rbd.get("image") == other_rbd.get("image")
        overlap = bool(set(rbd.get("monitors") or []) & set(other_rbd.get("monitors") or []))
        if same_image and overlap and not (rbd.get("readOnly") and other_rbd.get("readOnly")):
            return True
    return False


class VolumeRestrictionsFilter:
    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        relevant = tuple(v for v in pod.volumes if any(k in v for k in _KINDS))
        return relevant or SKIP

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        for other in node.pods.values():
            if not other.volumes or other.uid == pod.uid:
                continue
            for volume in state:
                for existing in other.volumes:
                    if volumes_conflict(volume, existing):
                        return _FAIL
        return FIT
