"""The shared reduce steps: by-max (and reversed), min-max, clamp, constant."""

from __future__ import annotations

import pytest

from extenders.plugins.helper.normalize import by_max, clamp, constant, min_max


@pytest.mark.parametrize(
    ("raw", "reverse", "expected"),
    [
        ({"a": 4.0, "b": 1.0, "c": 0.0}, False, {"a": 10.0, "b": 2.5, "c": 0.0}),
        ({"a": 4.0, "b": 1.0, "c": 0.0}, True, {"a": 0.0, "b": 7.5, "c": 10.0}),
        ({"a": 0.0, "b": 0.0}, False, {"a": 0.0, "b": 0.0}),
        ({"a": 0.0, "b": 0.0}, True, {"a": 10.0, "b": 10.0}),
        ({}, False, {}),
    ],
)
def test_by_max(raw: dict[str, float], reverse: bool, expected: dict[str, float]) -> None:
    assert by_max(raw, reverse) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"a": -4.0, "b": 6.0, "c": 1.0}, {"a": 0.0, "b": 10.0, "c": 5.0}),
        ({"a": 3.0, "b": 3.0}, {"a": 0.0, "b": 0.0}),
        ({}, {}),
    ],
)
def test_min_max(raw: dict[str, float], expected: dict[str, float]) -> None:
    assert min_max(raw) == pytest.approx(expected)


def test_clamp_and_constant() -> None:
    assert clamp({"a": 3.5, "b": 10.0}) == {"a": 3.5, "b": 10.0}
    assert clamp({"a": -1.0, "b": 12.0, "c": 4.0}) == {"a": 0.0, "b": 10.0, "c": 4.0}
    assert constant({"a": 3.0, "b": 7.0}) == {"a": 0.0, "b": 0.0}
    assert constant({"a": 3.0}, 10.0) == {"a": 10.0}
