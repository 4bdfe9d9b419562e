"""The explain endpoint's answer: every predicate's verdict and every priority's score, per node."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from extenders.engine.nominated import with_nominated
from extenders.engine.prepared import PreparedPod
from extenders.engine.scoring import score_nodes
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import Verdict
from extenders.plugins.names import KUBE_SCHEDULER_FILTER, KUBE_SCHEDULER_SCORER
from extenders.policy import Policy
from extenders.snapshot import NominatedPods, Snapshot


def _evaluate_with_nominated(
    prepared: PreparedPod, node: NodeInfo | None, nominated: NominatedPods
) -> tuple[list[tuple[str, Verdict]], list[PodInfo]]:
    """Every predicate's verdict, and the nominated pods they were judged with when those change it.

    As in kube-scheduler, a node must pass without and with the pods nominated to it: a predicate
    that passes alone but fails with them reports that failure.
    """
    verdicts = prepared.evaluate(node)
    if node is None or node.node is None or not nominated:
        return verdicts, []
    added = with_nominated(prepared, node, nominated)
    if added is None:
        return verdicts, []
    states, grown, extra = added
    with_them = dict(states.evaluate(grown))
    merged = [(name, v if not v.fit else with_them.get(name, v)) for name, v in verdicts]
    return merged, extra if merged != verdicts else []


def explain(
    policy: Policy, pod: PodInfo, snapshot: Snapshot, node_names: Iterable[str] | None = None
) -> dict[str, Any]:
    """Every predicate's verdict on every node, and the priorities over the nodes that fit.

    ``{"nodes": {name: {"fit", "first_failure": {"predicate", "plugin", "reason"} | None,
    "nominated_pods": [...], "predicates": {pred: {"plugin", "fit", "reason", "unresolvable"}},
    "priorities": {prio: {"plugin", "raw", "score"}}, "score"}}}``; ``plugin`` names the
    kube-scheduler plug-in that decides the same, ``first_failure`` is the failure kube-scheduler
    would report (the first in policy order) and ``nominated_pods`` the pods nominated to the node
    that the verdicts counted (only when they changed one). Nodes that do not fit have no
    priorities and score 0. All predicates are evaluated regardless of the policy's
    ``alwaysCheckAllPredicates``.
    """
    names = sorted(snapshot.nodes) if node_names is None else list(node_names)
    prepared = PreparedPod.build(policy, pod, snapshot)
    nominated = snapshot.nominated()
    out: dict[str, dict[str, Any]] = {}
    fitting: list[NodeInfo] = []
    for name in names:
        node = snapshot.nodes.get(name)
        verdicts, counted = _evaluate_with_nominated(prepared, node, nominated)
        fit = node is not None and node.node is not None and all(v.fit for _, v in verdicts)
        first = next(((pred, v) for pred, v in verdicts if not v.fit), None)
        failure = None
        if first is not None:
            plugin = KUBE_SCHEDULER_FILTER.get(first[0], first[0])
            failure = {"predicate": first[0], "plugin": plugin, "reason": first[1].reason}
        out[name] = {
            "fit": fit,
            "first_failure": failure,
            "nominated_pods": [p.key for p in counted],
            "predicates": {
                pred: {
                    "plugin": KUBE_SCHEDULER_FILTER.get(pred, pred),
                    "fit": v.fit,
                    "reason": v.reason,
                    "unresolvable": v.unresolvable,
                }
                for pred, v in verdicts
            },
            "priorities": {},
            "score": 0,
        }
        if fit and node is not None:
            fitting.append(node)
    scores, details = score_nodes(policy, pod, snapshot, fitting, detail=True)
    for info in fitting:
        entry = out[info.name]
        entry["priorities"] = {
            prio: {"plugin": KUBE_SCHEDULER_SCORER.get(prio, prio), **detail}
            for prio, detail in details.get(info.name, {}).items()
        }
        entry["score"] = scores.get(info.name, 0)
    return {"nodes": out}
