"""Which node-local scorers the equivalence cache keeps together: those reading the same node parts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from extenders.plugins.framework import Scorer
from extenders.plugins.registry import SCORERS
from extenders.policy import Policy


@dataclass(slots=True)
class ScorerGroup:
    """Scorers reading the same node parts, cached together: one entry per node holds all their raw
    scores. ``key`` names the group in the class's memo (and in the shared tier)."""

    key: str
    families: tuple[str, ...]
    names: list[str]  # the priorities, in policy order
    members: list[tuple[Scorer, Any]]  # (scorer, its state for this pod)


def group_key(priorities: Iterable[str]) -> str:
    """The memo's name of a group of cached scorers."""
    return "+".join(priorities)


def cached_groups(scorers: Iterable[tuple[str, Scorer, Any]]) -> list[ScorerGroup]:
    """The node-local ones of (priority, scorer, state), grouped by the node parts they read."""
    groups: dict[tuple[str, ...], ScorerGroup] = {}
    for prio_name, scorer, state in scorers:
        families = scorer.node_families
        if families is not None:
            group = groups.get(families)
            if group is None:
                group = groups[families] = ScorerGroup("", families, [], [])
            group.names.append(prio_name)
            group.members.append((scorer, state))
    for group in groups.values():
        group.key = group_key(group.names)
    return list(groups.values())


def score_groups(policy: Policy) -> list[str]:
    """The keys of the scorer groups the policy's prioritize may cache (a scorer that turns out
    constant for a pod leaves its group, whose key then differs): what the shared tier fetches."""
    return [g.key for g in cached_groups((name, SCORERS[name], None) for name, _ in policy.priority_weights)]
