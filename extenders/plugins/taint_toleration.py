"""Taint toleration: kube-scheduler's TaintToleration plug-in, its filter and its score.

Filter (PodToleratesNodeTaints): only NoSchedule and NoExecute taints block; PreferNoSchedule
is left to scoring. Unresolvable. Releases before 1.34.2 name the first untolerated taint in the
reason; later ones do not.

Score (TaintToleration): the count of PreferNoSchedule taints the pod does not tolerate,
normalised reversed, so the node with the most such taints gets 0 and an untainted node MAX
(every node MAX when none has any).
"""

from __future__ import annotations

from typing import Any

from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import (
    FIT,
    MAX_PRIORITY,
    ConstantScore,
    NodeFamily,
    ScoringContext,
    Verdict,
    summary_of,
)
from extenders.plugins.helper.normalize import by_max
from extenders.snapshot import Snapshot
from extenders.tolerations import DO_NOT_SCHEDULE_EFFECTS, first_untolerated_taint, tolerations_tolerate

# From 1.34.2 the reason no longer names the taint (extenders.features).
UNTOLERATED = Verdict(False, "node(s) had untolerated taint(s)", unresolvable=True)


def untolerated_reason(key: str, value: str) -> str:
    """The reason before 1.34.2: the first untolerated taint's key and value."""
    return f"node(s) had untolerated taint {{{key}: {value}}}"


class TaintTolerationFilter:
    node_families = (NodeFamily.TAINTS,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return pod.tolerations, snapshot.features.taint_reason_names_taint

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        facts = node.node
        if facts is None or not facts.taints:
            return FIT
        tolerations, names_taint = state
        taint = first_untolerated_taint(facts.taints, tolerations, DO_NOT_SCHEDULE_EFFECTS)
        if taint is None:
            return FIT
        if not names_taint:
            return UNTOLERATED
        return Verdict(False, untolerated_reason(taint.key, taint.value), unresolvable=True)


PREFER_NO_SCHEDULE = "PreferNoSchedule"
_TAINTED = "taint-toleration.prefer-no-schedule"  # ClusterSummary.names_where key


def _has_prefer_no_schedule(info: NodeInfo) -> bool:
    facts = info.node
    return facts is not None and any(taint.effect == PREFER_NO_SCHEDULE for taint in facts.taints)


class TaintTolerationScorer:
    node_families = (NodeFamily.TAINTS,)

    def prepare(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], ctx: ScoringContext
    ) -> list[dict[str, Any]]:
        # Only tolerations that can apply to PreferNoSchedule taints matter here.
        return [t for t in pod.tolerations if (t.get("effect") or "") in ("", PREFER_NO_SCHEDULE)]

    def score(self, pod: PodInfo, node: NodeInfo, state: Any, ctx: ScoringContext) -> float:
        if node.node is None:
            return 0.0
        count = 0
        for taint in node.node.taints:
            if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(state, taint):
                count += 1
        return float(count)

    def constant(
        self, pod: PodInfo, snapshot: Snapshot, nodes: list[NodeInfo], state: Any, ctx: ScoringContext
    ) -> ConstantScore | None:
        """No candidate has a PreferNoSchedule taint: every one counts 0, reversed to MAX."""
        tainted = summary_of(snapshot, ctx).names_where(_TAINTED, _has_prefer_no_schedule)
        if tainted and not tainted.isdisjoint([node.name for node in nodes]):
            return None
        return (0.0, float(MAX_PRIORITY))

    def normalize(self, raw: dict[str, float], state: Any) -> dict[str, float]:
        return by_max(raw, reverse=True)
