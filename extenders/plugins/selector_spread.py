"""SelectorSpread: spread the pods of one controller over nodes and zones (classic priority).

kube-scheduler matched the selectors of the Services/controllers selecting the pod; our
snapshot holds no Service objects, so "the same group" is: same namespace and the same
controller owner uid, not terminating. Raw score is that count per node; normalisation
gives fewer-is-better node and zone scores, blended with the zone weighted 2/3 when the
candidates carry zone labels (pods are looked up in ``NodeInfo.pods_by_owner``, not
scanned). A pod with topology spread constraints is left to
PodTopologySpread (0 everywhere here); a pod without an owner scores MAX everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext
from extenders.plugins.helper.normalize import constant
from extenders.snapshot import Snapshot

ZONE_WEIGHTING = 2.0 / 3.0
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
_BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"


def zone_key(labels: dict[str, str]) -> str:
    """The node's failure zone (region and zone, GA labels before beta); '' when unlabelled."""
    region = labels.get(REGION_LABEL) or labels.get(_BETA_REGION_LABEL) or ""
    zone = labels.get(ZONE_LABEL) or labels.get(_BETA_ZONE_LABEL) or ""
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


@dataclass(slots=True, frozen=True)
class SpreadState:
    namespace: str
    owner_uid: str  # '' when the pod has no controller: nothing to spread against
    zones: dict[str, str]  # candidate node name -> zone key ('' = none)


class SelectorSpreadScorer:
    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> SpreadState | None:
        if pod.topology_spread:
            return None
        zones = {info.name: zone_key(info.node.labels) if info.node else "" for info in nodes}
        owner_uid = pod.owner.uid if pod.owner is not None else ""
        return SpreadState(pod.namespace, owner_uid, zones)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or not state.owner_uid:
            return 0.0
        namespace = state.namespace
        count = 0
        for other in node.pods_by_owner.get(state.owner_uid, ()):
            if other.namespace == namespace and other.deletion_timestamp is None:
                count += 1
        return float(count)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        return (0.0, 0.0) if state is None else None  # left to PodTopologySpread

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        if state is None:
            return constant(raw)
        zones: dict[str, str] = state.zones
        max_node = max(raw.values(), default=0.0)
        by_zone: dict[str, float] = {}
        for name, count in raw.items():
            zone = zones.get(name, "")
            if zone:
                by_zone[zone] = by_zone.get(zone, 0.0) + count
        max_zone = max(by_zone.values(), default=0.0)
        out: dict[str, float] = {}
        for name, count in raw.items():
            score = MAX_PRIORITY * (max_node - count) / max_node if max_node > 0 else float(MAX_PRIORITY)
            zone = zones.get(name, "")
            if by_zone and zone:
                zone_score = float(MAX_PRIORITY)
                if max_zone > 0:
                    zone_score = MAX_PRIORITY * (max_zone - by_zone[zone]) / max_zone
                score = score * (1.0 - ZONE_WEIGHTING) + zone_score * ZONE_WEIGHTING
            out[name] = score
        return out
