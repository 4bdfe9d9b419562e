"""Tolerations against taints, with v1.Toleration's semantics (component-helpers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from extenders.model import Taint

# Taint effects that keep a pod off a node (PreferNoSchedule only steers scoring).
DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint: empty effect matches every effect, empty key with Exists every key."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == taint.value
    return False


def tolerations_tolerate(tolerations: Sequence[Mapping[str, Any]], taint: Taint) -> bool:
    """Whether any of the tolerations tolerates the taint."""
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]], effects: frozenset[str] | None = None
) -> Taint | None:
    """The first taint (with one of ``effects``, or any effect when None) no toleration tolerates."""
    for taint in taints:
        if effects is not None and taint.effect not in effects:
            continue
        if not tolerations_tolerate(tolerations, taint):
            return taint
    return None
