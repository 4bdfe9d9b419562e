"""What a spread constraint counts, shared by the filter and the score: the selector, and what the
node inclusion policies read of the pod (a part of the key of a tally of those counts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.canonical import canonical_json
from extenders.model import PodInfo


def constraint_selector(constraint: Mapping[str, Any], pod_labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The constraint's labelSelector with ``matchLabelKeys`` folded in as the pod's own values.

    A missing selector stays missing (it selects nothing, whatever the keys: kube-scheduler merges
    keys only into a selector that has requirements to add to, and the API refuses matchLabelKeys
    without a labelSelector anyway).
    """
    selector = constraint.get("labelSelector")
    keys = [k for k in constraint.get("matchLabelKeys") or [] if k in pod_labels]
    if selector is None or not keys:
        return None if selector is None else dict(selector)
    merged = dict(selector)
    merged["matchExpressions"] = [
        *(selector.get("matchExpressions") or []),
        *({"key": k, "operator": "In", "values": [pod_labels[k]]} for k in keys),
    ]
    return merged


def counts_nothing(selector: Mapping[str, Any] | None) -> bool:
    """Whether kube-scheduler counts no pod with ``selector``: a missing one selects nothing, and an
    empty one (``{}``, everything) is skipped when counting, although the pod still matches it."""
    return selector is None or not (selector.get("matchLabels") or selector.get("matchExpressions"))


def eligibility_key(pod: PodInfo, honor_affinity: bool, honor_taints: bool) -> bytes:
    """The parts of ``pod`` that decide which nodes count under the inclusion policies, canonical."""
    eligibility = {
        "nodeSelector": pod.node_selector if honor_affinity else None,
        "nodeAffinity": pod.affinity.get("nodeAffinity") if honor_affinity else None,
        "tolerations": pod.tolerations if honor_taints else None,
    }
    return canonical_json(eligibility)
