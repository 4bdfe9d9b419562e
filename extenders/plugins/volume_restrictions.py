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
from extenders.plugins.framework import FIT, SKIP, NodeFamily, Verdict
from extenders.snapshot import Snapshot

REASON = "node(s) had no available disk"
_FAIL = Verdict(False, REASON)
# Volume kinds compared by one identifying field: (kind, field, whether two read-only mounts may share it).
_BY_ID = (("gcePersistentDisk", "pdName", True), ("awsElasticBlockStore", "volumeID", False), ("iscsi", "iqn", True))
_KINDS = (*(kind for kind, _, _ in _BY_ID), "rbd")


def _both_read_only(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return bool(a.get("readOnly") and b.get("readOnly"))


def volumes_conflict(volume: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    """Whether mounting ``volume`` next to an already mounted ``existing`` is refused."""
    for kind, field, read_only_shares in _BY_ID:
        mine, theirs = volume.get(kind), existing.get(kind)
        if mine is None or theirs is None or mine.get(field) != theirs.get(field):
            continue
        if not (read_only_shares and _both_read_only(mine, theirs)):
            return True
    rbd, other_rbd = volume.get("rbd"), existing.get("rbd")
    if rbd is not None and other_rbd is not None:
        same_pool = (rbd.get("pool") or "rbd") == (other_rbd.get("pool") or "rbd")
        same_image = same_pool and rbd.get("image") == other_rbd.get("image")
        overlap = bool(set(rbd.get("monitors") or []) & set(other_rbd.get("monitors") or []))
        if same_image and overlap and not _both_read_only(rbd, other_rbd):
            return True
    return False


class VolumeRestrictionsFilter:
    node_families = (NodeFamily.PODS,)

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
