"""NoDiskConflict: kube-scheduler's VolumeRestrictions filter, for the volume types that still apply.

Two pods conflict on a node when they mount the same GCE PD (unless both read-only), the
same AWS EBS volume (always), the same RBD image from an overlapping monitor set (unless
both read-only) or the same iSCSI IQN (unless both read-only). Resolvable: evicting the
other pod frees the disk.

ReadWriteOncePod: a pod using a PersistentVolumeClaim whose access modes include
ReadWriteOncePod fails every node while another placed pod that has not terminated uses that
claim. Resolvable too, as in kube-scheduler since v1.27: preemption may evict that pod (``adjust``
counts it out). This part reads other nodes, so a call for a pod whose claim is in use is not
answered from the equivalence cache (``cacheable``). A claim the snapshot does not hold (PVCs
not watched, or not seen yet) counts as not ReadWriteOncePod; kube-scheduler itself turns a pod
whose claim does not exist away before asking the extender.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from extenders.model import NodeInfo, PodInfo, PVCInfo
from extenders.plugins.framework import FIT, SKIP, NodeFamily, Verdict
from extenders.snapshot import Snapshot

REASON = "node(s) had no available disk"
READ_WRITE_ONCE_POD_REASON = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
# The same before 1.34 (extenders.features).
READ_WRITE_ONCE_POD_REASON_OLD = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
_FAIL = Verdict(False, REASON)
_FAIL_READ_WRITE_ONCE_POD = Verdict(False, READ_WRITE_ONCE_POD_REASON)
_FAIL_READ_WRITE_ONCE_POD_OLD = Verdict(False, READ_WRITE_ONCE_POD_REASON_OLD)
# Volume kinds compared by one identifying field: (kind, field, whether two read-only mounts may share it).
_BY_ID = (("gcePersistentDisk", "pdName", True), ("awsElasticBlockStore", "volumeID", False), ("iscsi", "iqn", True))
_KINDS = (*(kind for kind, _, _ in _BY_ID), "rbd")
_CLAIM_USES = "volume_restrictions.claim_uses"
_CLAIM_USERS = "volume_restrictions.claim_users"


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


def claim_keys(pod: PodInfo) -> Iterator[str]:
    """``namespace/claim`` of each persistentVolumeClaim volume of the pod (once per volume)."""
    for volume in pod.volumes:
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            yield f"{pod.namespace}/{claim.get('claimName') or ''}"


def read_write_once_pod_claims(pod: PodInfo, pvcs: Mapping[str, PVCInfo]) -> frozenset[str]:
    """The pod's claims whose access modes include ReadWriteOncePod (unknown claims are not)."""
    found: list[str] = []
    for key in claim_keys(pod):
        info = pvcs.get(key)
        if info is not None and info.read_write_once_pod:
            found.append(key)
    return frozenset(found)


def _claim_uses(node: NodeInfo) -> tuple[tuple[str, str], ...] | None:
    """(claim, pod uid) for each claim volume of the node's pods that have not terminated.

    A pure function of the NodeInfo, kept per node by the snapshot summary; pods on a node the
    snapshot has no object for are not counted, as kube-scheduler lists only known nodes.
    """
    if node.node is None:
        return None
    found = [
        (key, pod.uid) for pod in node.pods.values() if pod.volumes and not pod.terminal for key in claim_keys(pod)
    ]
    return tuple(found) or None


def _users_by_claim(column: Mapping[str, tuple[tuple[str, str], ...]]) -> dict[str, list[str]]:
    """claim -> uids of the placed pods using it (once per volume), from the summary's column."""
    users: dict[str, list[str]] = {}
    for uses in column.values():
        for key, uid in uses:
            users.setdefault(key, []).append(uid)
    return users


def claim_users(snapshot: Snapshot) -> dict[str, list[str]]:
    """``_users_by_claim`` of the snapshot, kept in its summary while the column is unchanged (the
    column is replaced only when a node's claims change), so pods with such claims share one walk."""
    summary = snapshot.summary()
    column: dict[str, tuple[tuple[str, str], ...]] = summary.column(_CLAIM_USES, _claim_uses)
    return summary.derived(_CLAIM_USERS, column, lambda: _users_by_claim(column))


def _uses_on(node: NodeInfo, claims: frozenset[str], uid: str) -> int:
    """How many volumes of the node's other, not terminated, pods use one of ``claims``."""
    return sum(
        key in claims
        for pod in node.pods.values()
        if pod.volumes and pod.uid != uid and not pod.terminal
        for key in claim_keys(pod)
    )


@dataclass(slots=True, frozen=True)
class VolumeState:
    disks: tuple[dict[str, Any], ...]  # the pod's volumes of the kinds compared node by node
    claims: frozenset[str]  # its ReadWriteOncePod claims
    in_use: int  # volumes of other placed pods using one of ``claims``
    in_use_verdict: Verdict = _FAIL_READ_WRITE_ONCE_POD  # worded as the followed release words it


class VolumeRestrictionsFilter:
    node_families = (NodeFamily.PODS,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        disks = tuple(v for v in pod.volumes if any(k in v for k in _KINDS))
        claims = read_write_once_pod_claims(pod, snapshot.pvcs) if pod.volumes and snapshot.pvcs else frozenset()
        in_use = 0
        if claims:
            users = claim_users(snapshot)
            uid = pod.uid
            in_use = sum(other != uid for key in claims for other in users.get(key, ()))
        if not disks and not in_use:
            return SKIP
        if not snapshot.features.rwop_reason_new_wording:
            return VolumeState(disks, claims, in_use, _FAIL_READ_WRITE_ONCE_POD_OLD)
        return VolumeState(disks, claims, in_use)

    def adjust(self, state: Any, pod: PodInfo, old: NodeInfo | None, new: NodeInfo) -> Any:
        """Pods removed from (or added to) a node stop (or start) using the pod's claims."""
        if state is SKIP or not state.claims:
            return state
        delta = _uses_on(new, state.claims, pod.uid) - (_uses_on(old, state.claims, pod.uid) if old else 0)
        return replace(state, in_use=state.in_use + delta) if delta else state

    def cacheable(self, state: Any) -> bool:
        """Whether the verdicts rest on the node alone: not while a ReadWriteOncePod claim is in use."""
        return state is SKIP or not state.in_use

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        if state.disks:
            for other in node.pods.values():
                if not other.volumes or other.uid == pod.uid:
                    continue
                for volume in state.disks:
                    for existing in other.volumes:
                        if volumes_conflict(volume, existing):
                            return _FAIL
        if state.in_use > 0:
            verdict: Verdict = state.in_use_verdict
            return verdict
        return FIT
