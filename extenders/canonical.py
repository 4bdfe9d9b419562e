"""Canonical JSON bytes of API values, for cache keys and digests."""

from __future__ import annotations

import json

import orjson


def canonical_json(value: object) -> bytes:
    """``value`` as JSON with sorted keys: equal values give equal bytes, different values different bytes.

    orjson refuses integers beyond 64 bits, which fields the API keeps free-form (a volume's source)
    or a caller's unknown fields may hold; the stdlib encodes those. Its spaced separators and the
    marker keep such a text from ever equalling a compact one.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return b"json:" + json.dumps(value, sort_keys=True).encode()
