"""Canonical JSON for keys and digests: order-free, and total over what the API may hold."""

from __future__ import annotations

from extenders.canonical import canonical_json


def test_key_order_does_not_matter_and_values_do() -> None:
    assert canonical_json({"b": [1, {"y": 2, "x": 1}], "a": "s"}) == canonical_json(
        {"a": "s", "b": [1, {"x": 1, "y": 2}]}
    )
    assert canonical_json({"a": 1}) != canonical_json({"a": 2})


def test_integers_past_64_bits_are_encoded_exactly_and_stay_apart_from_compact_texts() -> None:
    huge = {"b": 2**80, "a": [1, 2]}
    assert canonical_json(huge) == canonical_json({"a": [1, 2], "b": 2**80})
    assert canonical_json(huge) != canonical_json({**huge, "b": 2**80 + 1})
    assert str(2**80).encode() in canonical_json(huge)
    assert canonical_json({"a": [1, 2], "b": 1}) != canonical_json(huge)
