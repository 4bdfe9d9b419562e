"""SelectorSpread: spread a pod's group over nodes and zones (the classic priority, no longer in kube-scheduler).

As kube-scheduler's former plug-in: the group is the live (not terminating) pods of the pod's
namespace that its default selector picks (its Services' and its controller's selectors,
``extenders.plugins.helper.default_selector``), counted per candidate node through the label index.
Normalisation gives fewer-is-better node scores and, when some candidate carries a zone (region and
zone labels, the beta ones first as ``GetZoneKey`` reads them), zone scores from the candidates'
counts summed per zone, blended with the zone weighted 2/3 on the candidates that have one. A pod
with topology spread constraints is left to PodTopologySpread (0 everywhere here); a pod with an
empty default selector (no Service or known controller selects it) scores MAX everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, ScoringContext
from extenders.plugins.helper.default_selector import default_query
from extenders.plugins.helper.normalize import constant
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery

ZONE_WEIGHTING = 2.0 / 3.0
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
_BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"


def zone_key(labels: Mapping[str, str]) -> str:
    """The node's failure zone as ``GetZoneKey`` builds it (region and zone, each from its beta
    label when the node has that label, else from the GA one); '' when neither is set."""
    zone = labels[_BETA_ZONE_LABEL] if _BETA_ZONE_LABEL in labels else labels.get(ZONE_LABEL, "")
    region = labels[_BETA_REGION_LABEL] if _BETA_REGION_LABEL in labels else labels.get(REGION_LABEL, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


@dataclass(slots=True, frozen=True)
class SpreadState:
    query: PodQuery | None  # the default selector over the pod's namespace; None: it is empty
    zones: dict[str, str]  # candidate node name -> zone key ('' = none); empty without a query


class SelectorSpreadScorer:
    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> SpreadState | None:
        if pod.topology_spread:
            return None
        query = default_query(pod, snapshot)
        if query is None:
            return SpreadState(None, {})
        zones = {info.name: zone_key(info.node.labels) if info.node else "" for info in nodes}
        return SpreadState(query, zones)

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if state is None or state.query is None:
            return 0.0
        return float(state.query.count(node, live_only=True))

    def score_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any, ctx: ScoringContext) -> list[float]:
        if state is None or state.query is None:
            return [0.0] * len(nodes)
        count = state.query.count
        return [float(count(node, live_only=True)) for node in nodes]

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        if state is None:
            return (0.0, 0.0)  # left to PodTopologySpread
        if state.query is None:
            return (0.0, float(MAX_PRIORITY))  # nothing to spread against: every count is 0
        return None

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
