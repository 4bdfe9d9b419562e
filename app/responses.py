"""JSON answers serialised with orjson: node lists echoed back can be large, and this is the hot path."""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import Response


def render(content: Any) -> bytes:
    try:
        return orjson.dumps(content)
    except orjson.JSONEncodeError:
        # orjson stops at 64-bit integers; an echoed object may carry larger ones.
        return json.dumps(content, separators=(",", ":")).encode()


class JSONAnswer(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return render(content)
