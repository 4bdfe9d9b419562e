"""The reduce steps the scoring plugins share, on floats scaled to 0..MAX_PRIORITY.

kube-scheduler does these in integer arithmetic on 0..100; we keep floats so the
engine's weighted sum loses nothing before the one final rounding to the wire's int.
"""

from __future__ import annotations

from collections.abc import Mapping

from extenders.plugins.framework import MAX_PRIORITY


def clamp(raw: Mapping[str, float]) -> dict[str, float]:
    """For scorers whose raw score is already on the 0..MAX scale (a guard, normally a copy)."""
    if not raw or (min(raw.values()) >= 0.0 and max(raw.values()) <= MAX_PRIORITY):
        return dict(raw)
    return {name: min(max(score, 0.0), float(MAX_PRIORITY)) for name, score in raw.items()}


def clamp_values(values: list[float]) -> list[float]:
    """``clamp`` over a list: the list itself when every score is in range already."""
    if not values or (min(values) >= 0.0 and max(values) <= MAX_PRIORITY):
        return values
    top = float(MAX_PRIORITY)
    return [min(max(score, 0.0), top) for score in values]


def by_max(raw: Mapping[str, float], reverse: bool = False) -> dict[str, float]:
    """Scale so the largest raw score gets MAX (DefaultNormalizeScore); ``reverse`` flips it.

    When every raw score is zero the result is 0 everywhere, or MAX everywhere when reversed.
    """
    top = max(raw.values(), default=0.0)
    if top <= 0:
        fill = float(MAX_PRIORITY) if reverse else 0.0
        return dict.fromkeys(raw, fill)
    scale = MAX_PRIORITY / top
    if reverse:
        return {name: MAX_PRIORITY - score * scale for name, score in raw.items()}
    return {name: score * scale for name, score in raw.items()}


def min_max(raw: Mapping[str, float]) -> dict[str, float]:
    """Map the lowest raw score to 0 and the highest to MAX; all equal gives 0 everywhere."""
    if not raw:
        return {}
    low = min(raw.values())
    span = max(raw.values()) - low
    if span <= 0:
        return dict.fromkeys(raw, 0.0)
    scale = MAX_PRIORITY / span
    return {name: (score - low) * scale for name, score in raw.items()}


def constant(raw: Mapping[str, float], value: float = 0.0) -> dict[str, float]:
    """The same score for every node: what a plugin that skips a pod contributes."""
    return dict.fromkeys(raw, value)
