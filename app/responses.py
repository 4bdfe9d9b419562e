"""JSON answers serialised with orjson: node lists echoed back can be large, and this is the hot path."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class JSONAnswer(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
